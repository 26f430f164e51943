// The share of requests that failed (transport error or status >= 400) by endpoint: errors / count summed over the
// interval points of the window, so every request counts, whatever capture.rawPoints is.
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and (r._field == "count" or r._field == "errors"))
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by, "_field"])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> map(fn: (r) => ({r with _value: float(v: r.errors) / float(v: r.count)}))
    |> drop(columns: ["count", "errors"])
