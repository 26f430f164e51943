// Raw points: the twenty latest failed requests (transport error or status >= 400), newest first, with their
// duration and error. Needs capture.rawPoints = .all or .errorsAndSlow (which keeps every failed request).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and (r._field == "errors" or r._field == "duration_ms" or r._field == "error"))
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => r.errors == 1)
    |> group()
    |> sort(columns: ["_time"], desc: true)
    |> limit(n: 20)
    |> keep(columns: ["_time", "host", "method", "path", "status", "instance", "duration_ms", "error"])
