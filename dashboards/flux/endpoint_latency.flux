// Fleet-wide latency p50/p95/p99 (ms) by endpoint, from the interval points' duration histogram: each le_<bound>
// field is summed over the window and the instances (its counts are per interval, so sums merge), becomes an `le`
// row with the bound as a float (le_inf is +Inf), and histogramQuantile() interpolates within the bucket that holds
// the quantile. Every request counts, whatever capture.rawPoints is.
import "strings"

every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

buckets = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and r._field =~ /^le_/)
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by, "_field"])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value), le: if r._field == "le_inf" then float(v: "+Inf") else float(v: strings.trimPrefix(v: r._field, prefix: "le_"))}))
    |> group(columns: ["host", "method", "path", v.group_by, "_time"])

percentile = (q, name) => buckets
    |> histogramQuantile(quantile: q)
    |> set(key: "quantile", value: name)

union(tables: [percentile(q: 0.50, name: "p50"), percentile(q: 0.95, name: "p95"), percentile(q: 0.99, name: "p99")])
    |> group(columns: ["host", "method", "path", v.group_by, "quantile"])
