// swift-metrics timers (APIHealthMetrics): fleet-wide p50/p95/p99 (ms) by label (measurement), from the timers'
// histogram: each le_<bound> field is summed over the window, the instances and the label's dimensions, becomes an
// `le` row (le_inf is +Inf), and histogramQuantile() interpolates. Needs no writesQuantiles.
import "strings"

every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

buckets = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r.metric_type == "timer" and r._field =~ /^le_/)
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country))
    |> group(columns: ["_measurement", "_field"])
    |> aggregateWindow(every: every, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value), le: if r._field == "le_inf" then float(v: "+Inf") else float(v: strings.trimPrefix(v: r._field, prefix: "le_"))}))
    |> group(columns: ["_measurement", "_time"])

percentile = (q, name) => buckets
    |> histogramQuantile(quantile: q)
    |> set(key: "quantile", value: name)

union(tables: [percentile(q: 0.50, name: "p50"), percentile(q: 0.95, name: "p95"), percentile(q: 0.99, name: "p99")])
    |> group(columns: ["_measurement", "quantile"])
