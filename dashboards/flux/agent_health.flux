// The agent's own health: points dropped, rejected, retries and pending, per service.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_agent")
    |> filter(fn: (r) => r._field == "points_dropped" or r._field == "points_rejected" or r._field == "retries" or r._field == "pending_lines")
    |> group(columns: ["service", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
