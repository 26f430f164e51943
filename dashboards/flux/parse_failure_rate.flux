// Parse failures per request, by host, module and endpoint.
failures = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_parse_failure" and r._field == "count")
    |> group(columns: ["host", "module", "path"])
    |> aggregateWindow(every: v.windowPeriod, fn: sum, createEmpty: false)

requests = from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "duration_ms")
    |> group(columns: ["host", "module", "path"])
    |> aggregateWindow(every: v.windowPeriod, fn: count, createEmpty: false)

join(tables: {failures: failures, requests: requests}, on: ["_time", "host", "module", "path"])
    |> map(fn: (r) => ({_time: r._time, host: r.host, module: r.module, path: r.path, _value: float(v: r._value_failures) / float(v: r._value_requests)}))
    |> group(columns: ["host", "module", "path"])
