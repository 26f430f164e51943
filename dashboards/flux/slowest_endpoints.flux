// The ten slowest endpoints by fleet-wide p95 latency (ms) over the time range, slowest first: the le_<bound> fields of
// the interval points summed over the range and the instances, then histogramQuantile().
import "strings"

from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and r._field =~ /^le_/)
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> group(columns: ["host", "method", "path", "_field"])
    |> sum()
    |> map(fn: (r) => ({r with _value: float(v: r._value), le: if r._field == "le_inf" then float(v: "+Inf") else float(v: strings.trimPrefix(v: r._field, prefix: "le_"))}))
    |> group(columns: ["host", "method", "path"])
    |> histogramQuantile(quantile: 0.95)
    |> group()
    |> top(n: 10, columns: ["_value"])
    |> keep(columns: ["host", "method", "path", "_value"])
