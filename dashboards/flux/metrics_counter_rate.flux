// swift-metrics counters (APIHealthMetrics): increments per second by label (measurement), the rate of each
// series' cumulative count summed over its dimensions (resets are skipped).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r.metric_type == "counter" and r._field == "count")
    |> derivative(unit: 1s, nonNegative: true)
    |> aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)
    |> group(columns: ["_measurement", "_time"])
    |> sum()
    |> group(columns: ["_measurement"])
