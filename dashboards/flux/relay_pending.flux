// Lines the relay took and has not forwarded yet, per relay instance: its spool's backlog.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_relay")
    |> filter(fn: (r) => r._field == "lines_pending")
    |> group(columns: ["service", "instance", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
