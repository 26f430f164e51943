// Parse failures per request, by host, module and endpoint: the parse-failure points over the requests counted in the
// interval points of the same window (every request counts, whatever capture.rawPoints is).
every = if int(v: v.windowPeriod) < int(v: 10s) then 10s else v.windowPeriod

failures = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_parse_failure" and r._field == "count")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "module", "path"])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)

requests = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and r._field == "count")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "module", "path"])
    |> aggregateWindow(every: every, offset: 1ns, fn: sum, createEmpty: false)

join(tables: {failures: failures, requests: requests}, on: ["_time", "host", "module", "path"])
    |> map(fn: (r) => ({_time: r._time, host: r.host, module: r.module, path: r.path, _value: float(v: r._value_failures) / float(v: r._value_requests)}))
    |> group(columns: ["host", "module", "path"])
