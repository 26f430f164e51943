// Failed requests per second by status class (4xx, 5xx, error).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "errors" and r._value == 1)
    |> group(columns: ["status_class"])
    |> aggregateWindow(every: v.windowPeriod, fn: count, createEmpty: true)
    |> map(fn: (r) => ({r with _value: float(v: r._value) / float(v: int(v: v.windowPeriod)) * 1000000000.0}))
