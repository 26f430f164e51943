// SLO: the share of each endpoint's error budget left over the time range, for its availability objective (1 - the
// failed share over 1 - objective_availability) and its latency objective (1 - the share slower than
// objective_latency_ms over 1 - objective_latency). Below 0 the objective is missed; endpoints without an objective
// are not shown.
data = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by, "_field"])

counts = data
    |> filter(fn: (r) => r._field == "count" or r._field == "errors" or r._field == "requests_within_latency_objective")
    |> sum()
    |> map(fn: (r) => ({r with _value: float(v: r._value)}))

objectives = data
    |> filter(fn: (r) => r._field == "objective_availability" or r._field == "objective_latency")
    |> max()
    |> drop(columns: ["_time"])

union(tables: [counts, objectives])
    |> group(columns: ["host", "method", "path", v.group_by])
    |> pivot(rowKey: ["_start"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => exists r.objective_availability and exists r.objective_latency)
    |> map(fn: (r) => ({r with availability_budget_left: 1.0 - r.errors / r.count / (1.0 - r.objective_availability), latency_budget_left: 1.0 - (1.0 - r.requests_within_latency_objective / r.count) / (1.0 - r.objective_latency)}))
    |> drop(columns: ["count", "errors", "requests_within_latency_objective", "objective_availability", "objective_latency", "_start", "_stop"])
