// The share of requests that took at most 300 ms, by endpoint: le_300 / count summed over the interval points of the
// window. Exact, because 300 ms is a bound of the duration histogram; for another threshold, use the le_<bound> field
// of a bound in AggregationOptions.durationBoundaries.
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and (r._field == "le_300" or r._field == "count"))
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by, "_field"])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> map(fn: (r) => ({r with _value: float(v: r.le_300) / float(v: r.count)}))
    |> drop(columns: ["count", "le_300"])
