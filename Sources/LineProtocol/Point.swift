/// An instant as seconds and nanoseconds since the Unix epoch, wide enough for any `Date`.
///
/// Converting to a ``Precision`` is exact integer arithmetic; an instant that does not fit an `Int64`
/// at that precision is refused with ``LineProtocolError/timestampOutOfRange(_:_:)``.
///
/// ```swift
/// let t = Timestamp(nanosecondsSinceEpoch: 1_700_000_000_123_456_789)
/// t.value(in: .ms)  // 1_700_000_000_123
/// ```
public struct Timestamp: Sendable, Hashable, Comparable {
    /// Whole seconds since 1970-01-01T00:00:00Z (negative before it).
    public var seconds: Int64
    /// Nanoseconds within the second, 0 ..< 1_000_000_000.
    public var nanoseconds: Int64

    /// The instant `seconds` and `nanoseconds` after the epoch; nanoseconds outside one second carry
    /// into the seconds.
    ///
    /// - Parameters:
    ///   - seconds: Whole seconds since the epoch.
    ///   - nanoseconds: Nanoseconds to add (any value, negative included).
    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        let (carry, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        self.seconds = seconds &+ carry
        self.nanoseconds = rest
        if self.nanoseconds < 0 {
            self.nanoseconds += 1_000_000_000
            self.seconds &-= 1
        }
    }

    /// The instant `value` nanoseconds after the epoch.
    ///
    /// - Parameter value: Nanoseconds since the epoch (negative before it).
    public init(nanosecondsSinceEpoch value: Int64) {
        self.init(seconds: 0, nanoseconds: value)
    }

    /// The instant as an integer count of `precision` units since the epoch, rounded towards negative
    /// infinity.
    ///
    /// - Parameter precision: The unit to count in.
    /// - Returns: The count, or `nil` when it does not fit an `Int64` (or InfluxDB's range of
    ///   ±(2⁶³ − 2) ns).
    public func value(in precision: Precision) -> Int64? {
        // One case per precision, so each division is by a constant (a multiplication).
        switch precision {
        case .ns: value(unit: 1)
        case .us: value(unit: 1_000)
        case .ms: value(unit: 1_000_000)
        case .s: value(unit: 1_000_000_000)
        }
    }

    @inline(__always)
    private func value(unit: Int64) -> Int64? {
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000 / unit)
        if overflow { return nil }
        let (sum, overflow2) = scaled.addingReportingOverflow(nanoseconds / unit)
        if overflow2 { return nil }
        let (nanos, overflow3) = sum.multipliedReportingOverflow(by: unit)
        if overflow3 || nanos < Timestamp.minimumNanoseconds || nanos > Timestamp.maximumNanoseconds { return nil }
        return sum
    }

    /// The instant that `value` units of `precision` after the epoch denote.
    ///
    /// - Parameters:
    ///   - value: The count of units since the epoch, as a line's timestamp holds it.
    ///   - precision: The unit.
    public init(_ value: Int64, precision: Precision) {
        let perSecond = 1_000_000_000 / precision.nanosecondsPerUnit
        var (seconds, rest) = value.quotientAndRemainder(dividingBy: perSecond)
        if rest < 0 {
            rest += perSecond
            seconds -= 1
        }
        self.seconds = seconds
        self.nanoseconds = rest * precision.nanosecondsPerUnit
    }

    /// The smallest instant InfluxDB stores: −2⁶³ + 2 ns (1677-09-21).
    public static let minimumNanoseconds: Int64 = Int64.min + 2
    /// The largest instant InfluxDB stores: 2⁶³ − 2 ns (2262-04-11).
    public static let maximumNanoseconds: Int64 = Int64.max - 1

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }
}

/// A point: a measurement, tags, typed fields and an optional timestamp.
///
/// ```swift
/// let point = Point(
///     measurement: "apihealth_request",
///     tags: ["host": "api.example.com", "method": "GET"],
///     fields: ["duration_ms": 12.5, "status_code": 200, "success": true],
///     timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000)
/// )
/// var buffer: [UInt8] = []
/// try LineEncoder(precision: .ns).encode(point, into: &buffer)
/// ```
///
/// Tags are written sorted by key; fields are written in the order given. Without a timestamp the
/// server assigns its own time on arrival.
public struct Point: Sendable, Hashable {
    /// One tag: a key and a value, both strings. Tags identify a series and are indexed.
    public struct Tag: Sendable, Hashable {
        /// The tag key.
        public var key: String
        /// The tag value; an empty one is left out when the point is written.
        public var value: String

        /// A tag.
        ///
        /// - Parameters:
        ///   - key: The tag key.
        ///   - value: The tag value.
        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    /// One field: a key and a typed value.
    public struct Field: Sendable, Hashable {
        /// The field key.
        public var key: String
        /// The typed value.
        public var value: FieldValue

        /// A field.
        ///
        /// - Parameters:
        ///   - key: The field key.
        ///   - value: The typed value.
        public init(_ key: String, _ value: FieldValue) {
            self.key = key
            self.value = value
        }
    }

    /// The measurement name; it must not be empty or start with `_` or `#`.
    public var measurement: String
    /// The tags, in any order (they are written sorted by key).
    public var tags: [Tag]
    /// The fields, written in this order; at least one must be writable.
    public var fields: [Field]
    /// When the point happened; `nil` lets the server stamp it on arrival.
    public var timestamp: Timestamp?

    /// A point from tag and field values.
    ///
    /// - Parameters:
    ///   - measurement: The measurement name.
    ///   - tags: The tags.
    ///   - fields: The fields.
    ///   - timestamp: When the point happened, or `nil`.
    public init(measurement: String, tags: [Tag] = [], fields: [Field], timestamp: Timestamp? = nil) {
        self.measurement = measurement
        self.tags = tags
        self.fields = fields
        self.timestamp = timestamp
    }

    /// A point from literals, as in `tags: ["host": "a"], fields: ["usage": 0.5]`.
    ///
    /// - Parameters:
    ///   - measurement: The measurement name.
    ///   - tags: The tags, key and value.
    ///   - fields: The fields, key and value, in the order written.
    ///   - timestamp: When the point happened, or `nil`.
    public init(
        measurement: String,
        tags: KeyValuePairs<String, String> = [:],
        fields: KeyValuePairs<String, FieldValue>,
        timestamp: Timestamp? = nil
    ) {
        self.measurement = measurement
        self.tags = tags.map { Tag($0.key, $0.value) }
        self.fields = fields.map { Field($0.key, $0.value) }
        self.timestamp = timestamp
    }

    /// The value of a tag.
    ///
    /// - Parameter key: The tag key.
    /// - Returns: The value of the last tag with that key, or `nil`.
    public func tag(_ key: String) -> String? {
        tags.last(where: { $0.key == key })?.value
    }

    /// The value of a field.
    ///
    /// - Parameter key: The field key.
    /// - Returns: The value of the last field with that key, or `nil`.
    public func field(_ key: String) -> FieldValue? {
        fields.last(where: { $0.key == key })?.value
    }
}
