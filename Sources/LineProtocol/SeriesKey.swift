/// A measurement and its tags rendered once, escaped and sorted, for reuse across many points.
///
/// Rendering the series part of a line is most of the work of encoding; a series key lets the hot path
/// format only fields and the timestamp, as swift-prometheus does with its prerendered labels.
///
/// ```swift
/// let series = try SeriesKey(measurement: "apihealth_request", tags: [Point.Tag("host", "api.example.com")])
/// try encoder.encode(fields: [Point.Field("duration_ms", 12.5)], timestamp: now, series: series, into: &buffer)
/// ```
public struct SeriesKey: Sendable, Hashable {
    /// The escaped bytes: `measurement,key=value,…` with tags sorted by key.
    public let bytes: [UInt8]
    /// What rendering repaired or dropped (counted once per point encoded with this key).
    public let repairs: LineEncoder.Repairs

    /// Renders a measurement and its tags.
    ///
    /// - Parameters:
    ///   - measurement: The measurement name.
    ///   - tags: The tags, in any order; empty values and reserved keys are left out (counted in
    ///     ``repairs``).
    /// - Throws: ``LineProtocolError`` for a measurement that cannot be written.
    public init(measurement: String, tags: [Point.Tag] = []) throws(LineProtocolError) {
        var repairs = LineEncoder.Repairs()
        try LineEncoder.checkMeasurement(measurement, repairs: &repairs)
        var bound = nameBound(measurement)
        for tag in tags { bound += nameBound(tag.key) + nameBound(tag.value) + 2 }
        self.bytes = ByteWriter.collect(bound: bound) { writer in
            appendName(measurement, .measurement, into: &writer)
            LineEncoder.appendTags(tags, into: &writer, repairs: &repairs)
        }
        self.repairs = repairs
    }
}
