// Failed requests per second by status class (4xx, 5xx, and error for transport failures), from the interval
// points' errors: every request counts, whatever capture.rawPoints is.
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and r._field == "errors")
    |> filter(fn: (r) => r._value > 0)
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["status_class", v.group_by])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value) / float(v: int(v: every)) * 1000000000.0}))
