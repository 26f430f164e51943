// swift-metrics timers (APIHealthMetrics): p99 in ms by label (measurement), the highest interval p99 in each window.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r.metric_type == "timer" and r._field == "p99")
    |> group(columns: ["_measurement"])
    |> aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)
