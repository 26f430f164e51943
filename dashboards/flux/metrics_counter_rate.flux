// swift-metrics counters (APIHealthMetrics): increments per second by label (measurement), the rate of each
// series' cumulative count (one series per instance and dimensions) summed over the fleet (resets are skipped).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r.metric_type == "counter" and r._field == "count")
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country))
    |> derivative(unit: 1s, nonNegative: true)
    |> aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)
    |> group(columns: ["_measurement", "_time"])
    |> sum()
    |> group(columns: ["_measurement"])
