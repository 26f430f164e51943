// Requests per second by module.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "duration_ms")
    |> group(columns: ["module"])
    |> aggregateWindow(every: v.windowPeriod, fn: count, createEmpty: true)
    |> map(fn: (r) => ({r with _value: float(v: r._value) / float(v: int(v: v.windowPeriod)) * 1000000000.0}))
