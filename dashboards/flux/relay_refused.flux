// Lines the relay refused per second, by reason, per relay instance: a line's own reasons (unparsable, a foreign measurement, tag or field, a wrong type, a timestamp out of the window, past the key's new series) and a whole write's (an unknown key, too large, not gzip, throttled).
from(bucket: v.bucket)
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "apihealth_relay")
    |> filter(fn: (r) => r._field == "refused_unparsable" or r._field == "refused_measurement" or r._field == "refused_tag" or r._field == "refused_tag_value" or r._field == "refused_service" or r._field == "refused_place" or r._field == "refused_version" or r._field == "refused_field" or r._field == "refused_field_type" or r._field == "refused_timestamp" or r._field == "refused_series_limit" or r._field == "refused_key" or r._field == "refused_body_too_large" or r._field == "refused_body" or r._field == "refused_throttled")
    |> group(columns: ["service", "instance", "_field"])
    |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)
    |> derivative(unit: 1s, nonNegative: true)
