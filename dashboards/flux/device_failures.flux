// Requests per second that failed on the device (no internet, roaming off, data not allowed: errors_device) or that
// their caller cancelled (cancelled), by host and field: not the API's failures, so in no availability, burn rate or
// reachability, and shown here apart. v.group_by splits them by service, instance, env or country.
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and (r._field == "errors_device" or r._field == "cancelled"))
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "_field", v.group_by])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)
    |> map(fn: (r) => ({r with _value: float(v: r._value) / float(v: int(v: every)) * 1000000000.0}))
