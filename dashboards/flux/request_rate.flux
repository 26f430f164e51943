// Requests per second by endpoint (host, method, path), from the interval points: every request counts, whatever
// capture.rawPoints is. v.group_by splits the fleet by service, instance, env or country; v.instance, v.env, v.country and v.host filter
// ("*" is every value). A window holds the intervals that ended in it, and is at least one 10 s interval long.
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and r._field == "count")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", v.group_by])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value) / float(v: int(v: every)) * 1000000000.0}))
