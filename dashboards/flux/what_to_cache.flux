// What to cache (needs capture.cacheAdvice, APIHEALTH_CACHE_ADVICE=1): per endpoint over the time range, its requests,
// the share whose body repeated the previous response of the same URL, the waiting (ms) a cache would have saved and
// what a 60 s max-age would have saved, the share a cache may store and the no-store responses; most saved first. Only
// the interval points that carry cache fields count.
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_request_interval" and (r._field == "count" or r._field == "cache_repeated" or r._field == "cache_repeated_ms" or r._field == "cache_repeated_ms_le_60" or r._field == "cache_storable" or r._field == "cache_no_store"))
    |> filter(fn: (r) => (v.instance == "*" or r.instance == v.instance) and (v.env == "*" or r.env == v.env) and (v.country == "*" or r.country == v.country) and (v.host == "*" or r.host == v.host))
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => exists r.cache_storable)
    |> group(columns: ["host", "method", "path"])
    |> reduce(identity: {count: 0.0, cache_repeated: 0.0, cache_repeated_ms: 0.0, cache_repeated_ms_le_60: 0.0, cache_storable: 0.0, cache_no_store: 0.0}, fn: (r, accumulator) => ({count: accumulator.count + float(v: r.count), cache_repeated: accumulator.cache_repeated + float(v: r.cache_repeated), cache_repeated_ms: accumulator.cache_repeated_ms + float(v: r.cache_repeated_ms), cache_repeated_ms_le_60: accumulator.cache_repeated_ms_le_60 + float(v: r.cache_repeated_ms_le_60), cache_storable: accumulator.cache_storable + float(v: r.cache_storable), cache_no_store: accumulator.cache_no_store + float(v: r.cache_no_store)}))
    |> group()
    |> sort(columns: ["cache_repeated_ms"], desc: true)
    |> map(fn: (r) => ({host: r.host, method: r.method, path: r.path, requests: r.count, repeated_share: r.cache_repeated / r.count, saved_ms: r.cache_repeated_ms, saved_ms_max_age_60s: r.cache_repeated_ms_le_60, storable_share: r.cache_storable / r.count, no_store: r.cache_no_store}))
