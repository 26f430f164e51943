// Raw points: the twenty slowest requests in the time range, slowest first, with when, where and what came back.
// Needs capture.rawPoints = .all or .errorsAndSlow (which keeps every request slower than its threshold or than its
// endpoint's p99).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "duration_ms")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group()
    |> top(n: 20, columns: ["_value"])
    |> keep(columns: ["_time", "host", "method", "path", "status", "instance", "_value"])
