// The agent's own health: points dropped, rejected, retries and pending, per service and instance.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_agent")
    |> filter(fn: (r) => r._field == "points_dropped" or r._field == "points_rejected" or r._field == "retries" or r._field == "pending_lines")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country))
    |> group(columns: ["service", "instance", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
