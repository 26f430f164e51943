// Raw points: latency p50/p95/p99 (ms) by host and path, exact, from one point per request. Needs
// capture.rawPoints = .all: with .errorsAndSlow the points are failures, slow requests and a sample, and these
// percentiles run high; the fleet-wide panels read the interval points instead.
data = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "duration_ms")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "path"])

percentile = (q, name) => data
    |> aggregateWindow(every: v.windowPeriod, fn: (column, tables=<-) => tables |> quantile(q: q, column: column, method: "exact_selector"), createEmpty: false)
    |> set(key: "quantile", value: name)

union(tables: [percentile(q: 0.50, name: "p50"), percentile(q: 0.95, name: "p95"), percentile(q: 0.99, name: "p99")])
    |> group(columns: ["host", "path", "quantile"])
