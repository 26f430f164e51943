// Write requests the relay answered 429 (over a client's or a key's lines per minute) per second, per relay instance.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_relay")
    |> filter(fn: (r) => r._field == "requests_throttled")
    |> group(columns: ["service", "instance", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
    |> derivative(unit: 1s, nonNegative: true)
