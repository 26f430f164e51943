// The ten slowest endpoints by p95 latency (ms).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request" and r._field == "duration_ms")
    |> group(columns: ["host", "path"])
    |> quantile(q: 0.95, method: "exact_selector")
    |> group()
    |> top(n: 10, columns: ["_value"])
    |> keep(columns: ["host", "path", "_value"])
