// The relay's lines per second, per relay instance: accepted (checked and taken from installs) and forwarded (acknowledged by the database). From the running totals of its health point.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_relay")
    |> filter(fn: (r) => r._field == "lines_accepted" or r._field == "lines_forwarded")
    |> group(columns: ["service", "instance", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
    |> derivative(unit: 1s, nonNegative: true)
