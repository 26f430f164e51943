// SLO: how fast each endpoint burns its error budget in each window, per objective: the bad share (failed, or slower
// than objective_latency_ms) over 1 - the objective. 1 spends a 30-day budget in 30 days; the page alerts start at
// 14.4 (over 1 h) and 6 (over 6 h).
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

data = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by, "_field"])

counts = data
    |> filter(fn: (r) => r._field == "count" or r._field == "errors" or r._field == "requests_within_latency_objective")
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value)}))

objectives = data
    |> filter(fn: (r) => r._field == "objective_availability" or r._field == "objective_latency")
    |> aggregateWindow(every: every, offset: 1ns, fn: max, createEmpty: false)

union(tables: [counts, objectives])
    |> group(columns: ["host", "method", "path", v.group_by])
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => exists r.objective_availability and exists r.objective_latency)
    |> map(fn: (r) => ({_time: r._time, host: r.host, method: r.method, path: r.path, availability: r.errors / r.count / (1.0 - r.objective_availability), latency: (1.0 - r.requests_within_latency_objective / r.count) / (1.0 - r.objective_latency)}))
