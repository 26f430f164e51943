/// Writes points as InfluxDB line protocol into a caller-owned byte buffer.
///
/// ```swift
/// let encoder = LineEncoder(precision: .ms)
/// var buffer: [UInt8] = []
/// buffer.reserveCapacity(64 * 1024)
/// let repairs = try encoder.encode(point, into: &buffer)
/// if !repairs.isEmpty { droppedFields += repairs.droppedFields }
/// ```
///
/// Whatever the input, the line it writes is one a real InfluxDB accepts. What line protocol cannot
/// express is handled like this:
///
/// | input | outcome |
/// |---|---|
/// | empty measurement, or one starting with `_` or `#` | ``LineProtocolError`` thrown, nothing written |
/// | no writable field left | ``LineProtocolError/noFields`` thrown, nothing written |
/// | timestamp outside `Int64` at the precision | ``LineProtocolError/timestampOutOfRange(_:_:)`` thrown |
/// | NaN or ±infinity float | the field is dropped (``Repairs/droppedFields``) |
/// | empty field key, key starting with `_`, key `time` | the field is dropped |
/// | empty tag key or value, key starting with `_`, key `time` | the tag is dropped (``Repairs/droppedTags``) |
/// | the same tag key twice | the last one is kept, the others dropped |
/// | the same field key twice | the last one is kept, the others dropped |
/// | a line feed or carriage return in a measurement, key or tag value | replaced by U+FFFD (``Repairs/repairedNames``) |
/// | a NUL or tab as the first byte of a measurement or field key (InfluxDB skips it as whitespace) | replaced by U+FFFD |
/// | any other control character (U+0000–U+001F, U+007F), tabs included, anywhere else in a name | written as is: InfluxDB stores it exactly |
/// | backslashes at the end of a measurement, key or tag value, or directly before a character InfluxDB
///   unescapes there (comma, space, `=`; and `"` in measurements and field keys) | removed: InfluxDB would
///   read them as an escape |
/// | string value over ``maximumStringBytes`` of UTF-8 | cut on a scalar boundary (``Repairs/truncatedStrings``) |
/// | a line feed or carriage return in a string value | replaced by U+FFFD (``Repairs/replacedLineBreaks``), so every point is one line for every reader |
/// | an unsigned value over `Int64.max` with ``writesUnsignedAsSigned`` | written as `Int64.max` (``Repairs/clampedUnsigned``) |
/// | a field whose key, after the series key and 4 bytes, passes ``maximumKeyLength`` | the field is dropped (``Repairs/droppedFields``) |
/// | no field key short enough for the series key | ``LineProtocolError/keyTooLong(_:)`` thrown, nothing written |
///
/// **Key length.** InfluxDB 1.x refuses a line when the series key as written (measurement and sorted
/// tags, escaped) plus one field key as written plus 4 bytes passes 65,535 bytes. The encoder never
/// writes such a line: for every field it writes, `seriesKey + fieldKey + 4 ≤ maximumKeyLength`.
///
/// Encoding allocates nothing when the buffer has room, tags are few (they are sorted in a stack
/// buffer) and floats print in 15 bytes or fewer.
public struct LineEncoder: Sendable {
    /// The longest string field value written, in bytes of UTF-8 before escaping.
    public static let maximumStringBytes = 65_535

    /// InfluxDB 1.x's limit on a series key as written plus one field key as written plus 4 bytes.
    public static let maximumKeyLength = 65_535

    /// The precision timestamps are written in; it must match the write request's `precision`.
    public var precision: Precision

    /// Writes unsigned integers as signed ones (`42i`, capped at `Int64.max` and counted in
    /// ``Repairs/clampedUnsigned``), for InfluxDB 1.x, which has no `u` type and would refuse the line.
    public var writesUnsignedAsSigned = false

    /// Makes an encoder for one write destination.
    ///
    /// - Parameters:
    ///   - precision: The unit timestamps are written in.
    ///   - writesUnsignedAsSigned: Whether unsigned fields are written as signed (InfluxDB 1.x).
    public init(precision: Precision = .ns, writesUnsignedAsSigned: Bool = false) {
        self.precision = precision
        self.writesUnsignedAsSigned = writesUnsignedAsSigned
    }

    /// What the encoder changed or left out to make a point writable. All zero for a clean point.
    public struct Repairs: Sendable, Hashable {
        /// Fields left out: non-finite floats, empty or reserved keys, earlier duplicates.
        public var droppedFields = 0
        /// Tags left out: empty keys or values, reserved keys, earlier duplicates.
        public var droppedTags = 0
        /// String values cut to ``LineEncoder/maximumStringBytes``.
        public var truncatedStrings = 0
        /// Names or tag values whose control characters were replaced or backslashes removed.
        public var repairedNames = 0
        /// String values whose line feeds or carriage returns were replaced by U+FFFD.
        public var replacedLineBreaks = 0
        /// Unsigned values over `Int64.max` written as `Int64.max` (``LineEncoder/writesUnsignedAsSigned``).
        public var clampedUnsigned = 0

        /// No repairs.
        public init() {}

        /// Whether the point was written exactly as given.
        public var isEmpty: Bool {
            droppedFields == 0 && droppedTags == 0 && truncatedStrings == 0 && repairedNames == 0
                && replacedLineBreaks == 0 && clampedUnsigned == 0
        }

        /// Adds the counts of `rhs` to `lhs`.
        ///
        /// - Parameters:
        ///   - lhs: The counts added to.
        ///   - rhs: The counts to add.
        public static func += (lhs: inout Repairs, rhs: Repairs) {
            lhs.droppedFields += rhs.droppedFields
            lhs.droppedTags += rhs.droppedTags
            lhs.truncatedStrings += rhs.truncatedStrings
            lhs.repairedNames += rhs.repairedNames
            lhs.replacedLineBreaks += rhs.replacedLineBreaks
            lhs.clampedUnsigned += rhs.clampedUnsigned
        }
    }

    /// Appends `point` as one line ending in `\n`. On error nothing is appended.
    ///
    /// - Parameters:
    ///   - point: The point to write.
    ///   - buffer: The bytes the line is appended to.
    /// - Returns: What was repaired or left out (all zero for a point written as given).
    /// - Throws: ``LineProtocolError`` when the point cannot be written at all.
    @discardableResult
    public func encode(_ point: Point, into buffer: inout [UInt8]) throws(LineProtocolError) -> Repairs {
        try encode(point, into: &buffer, claimingTimestamp: { _, timestamp in timestamp })
    }

    /// Appends `point` as one line, letting `adjust` change the timestamp once the series is known.
    ///
    /// - Parameters:
    ///   - point: The point to write.
    ///   - buffer: The bytes the line is appended to.
    ///   - adjust: Given the escaped series key and the timestamp in ``precision`` units, returns the
    ///     timestamp to write, or `nil` to decline the point.
    /// - Returns: What was repaired or left out (all zero for a point written as given).
    /// - Throws: ``LineProtocolError`` when the point cannot be written, or `adjust` declined it
    ///   (``LineProtocolError/timestampDeclined``).
    @available(
        *,
        deprecated,
        message: "use encode(_:into:): choosing a point's timestamp is the agent's rule, not the encoder's"
    )
    @discardableResult
    public func encode(
        _ point: Point,
        into buffer: inout [UInt8],
        adjustingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?
    ) throws(LineProtocolError) -> Repairs {
        try encode(point, into: &buffer, claimingTimestamp: adjust)
    }

    /// Appends `point` as one line, letting `adjust` change the timestamp once the series is known.
    ///
    /// `adjust` receives the escaped series key (measurement and sorted tags, as written) and the
    /// timestamp in ``precision`` units; it returns the timestamp to write, or `nil` to decline the point
    /// (nothing is written and ``LineProtocolError/timestampDeclined`` is thrown). It is not called for
    /// a point without a timestamp. The agent uses it to keep two points of one series off the same
    /// instant.
    @discardableResult
    package func encode(
        _ point: Point,
        into buffer: inout [UInt8],
        claimingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?
    ) throws(LineProtocolError) -> Repairs {
        // A timestamp out of range is the careful path's to report, after the measurement's errors.
        let timestamp = point.timestamp.map { $0.value(in: precision) }
        if timestamp != .some(nil),
            appendDirectly(point, timestamp: timestamp ?? nil, to: &buffer, adjustingTimestamp: adjust)
        {
            return Repairs()
        }
        return try encodeCarefully(point, into: &buffer, adjustingTimestamp: adjust)
    }

    /// The general path: repairs, drops and refusals as the table above says.
    func encodeCarefully(
        _ point: Point,
        into buffer: inout [UInt8],
        adjustingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?
    ) throws(LineProtocolError) -> Repairs {
        var repairs = Repairs()
        try Self.checkMeasurement(point.measurement, repairs: &repairs)
        let timestamp = try timestampValue(point.timestamp)
        try Self.checkFields(point.fields, repairs: &repairs)

        let bound = Self.bound(measurement: point.measurement, tags: point.tags, fields: point.fields)
        let failure = ByteWriter.writing(into: &buffer, bound: bound) { writer -> LineProtocolError? in
            let lineStart = writer.count
            appendName(point.measurement, .measurement, into: &writer)
            Self.appendTags(point.tags, into: &writer, repairs: &repairs)
            let seriesEnd = writer.count
            writer.append(UInt8(ascii: " "))
            if let failure = appendFields(
                point.fields,
                seriesBytes: seriesEnd - lineStart,
                into: &writer,
                repairs: &repairs
            ) {
                writer.rewind(to: lineStart)
                return failure
            }
            if let timestamp {
                guard
                    let adjusted = adjust(
                        UnsafeBufferPointer(start: writer.base + lineStart, count: seriesEnd - lineStart),
                        timestamp
                    )
                else {
                    writer.rewind(to: lineStart)
                    return .timestampDeclined
                }
                writer.append(UInt8(ascii: " "))
                appendDecimal(adjusted, into: &writer)
            }
            writer.append(UInt8(ascii: "\n"))
            return nil
        }
        if let failure { throw failure }
        return repairs
    }

    /// Appends one line for a prerendered series: only the fields and the timestamp are formatted.
    ///
    /// ```swift
    /// let series = try SeriesKey(measurement: "apihealth_request", tags: [Point.Tag("host", "api.example.com")])
    /// try encoder.encode(fields: fields, timestamp: now, series: series, into: &buffer)
    /// ```
    ///
    /// - Parameters:
    ///   - fields: The fields, written in this order.
    ///   - timestamp: When the point happened, or `nil` for the server's time.
    ///   - series: The measurement and tags, rendered once.
    ///   - buffer: The bytes the line is appended to.
    /// - Returns: What was repaired or left out (the series key's own repairs included).
    /// - Throws: ``LineProtocolError`` when no field can be written or the timestamp is out of range.
    @discardableResult
    public func encode(
        fields: [Point.Field],
        timestamp: Timestamp?,
        series: SeriesKey,
        into buffer: inout [UInt8]
    ) throws(LineProtocolError) -> Repairs {
        try encode(
            fields: fields,
            timestamp: timestamp,
            series: series,
            into: &buffer,
            claimingTimestamp: { _, value in value }
        )
    }

    /// Appends one line for a prerendered series, letting `adjust` change the timestamp first.
    ///
    /// - Parameters:
    ///   - fields: The fields, written in this order.
    ///   - timestamp: When the point happened, or `nil` for the server's time.
    ///   - series: The measurement and tags, rendered once.
    ///   - buffer: The bytes the line is appended to.
    ///   - adjust: Given the series key and the timestamp, returns the timestamp to write, or `nil`.
    /// - Returns: What was repaired or left out (the series key's own repairs included).
    /// - Throws: ``LineProtocolError`` when no field can be written, or `adjust` declined the point.
    @available(
        *,
        deprecated,
        message:
            "use encode(fields:timestamp:series:into:): choosing a point's timestamp is the agent's rule, not the encoder's"
    )
    @discardableResult
    public func encode(
        fields: [Point.Field],
        timestamp: Timestamp?,
        series: SeriesKey,
        into buffer: inout [UInt8],
        adjustingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?
    ) throws(LineProtocolError) -> Repairs {
        try encode(fields: fields, timestamp: timestamp, series: series, into: &buffer, claimingTimestamp: adjust)
    }

    /// Appends one line for a prerendered series, letting `adjust` change the timestamp first, as
    /// ``encode(_:into:claimingTimestamp:)`` does (here it is called before the fields are checked).
    @discardableResult
    package func encode(
        fields: [Point.Field],
        timestamp: Timestamp?,
        series: SeriesKey,
        into buffer: inout [UInt8],
        claimingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?
    ) throws(LineProtocolError) -> Repairs {
        var value: Int64?
        if let given = try timestampValue(timestamp) {
            guard let adjusted = series.bytes.withUnsafeBufferPointer({ adjust($0, given) }) else {
                throw .timestampDeclined
            }
            value = adjusted
        }
        if appendDirectly(fields: fields, timestamp: value, series: series, to: &buffer) { return series.repairs }
        var repairs = series.repairs
        try Self.checkFields(fields, repairs: &repairs)
        let bound = series.bytes.count + Self.fieldsBound(fields) + 24
        let failure = ByteWriter.writing(into: &buffer, bound: bound) { writer -> LineProtocolError? in
            let lineStart = writer.count
            series.bytes.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
            writer.append(UInt8(ascii: " "))
            if let failure = appendFields(fields, seriesBytes: series.bytes.count, into: &writer, repairs: &repairs) {
                writer.rewind(to: lineStart)
                return failure
            }
            if let value {
                writer.append(UInt8(ascii: " "))
                appendDecimal(value, into: &writer)
            }
            writer.append(UInt8(ascii: "\n"))
            return nil
        }
        if let failure { throw failure }
        return repairs
    }

    /// Room the fields may take: names at most tripled, values at their longest form.
    static func fieldsBound(_ fields: [Point.Field]) -> Int {
        var bound = 0
        for field in fields {
            bound += nameBound(field.key) + 2
            switch field.value {
            case .float: bound += 32
            case .int, .uint: bound += 21
            case .bool: bound += 5
            // A line break becomes the three bytes of U+FFFD.
            case .string(let value): bound += 3 * min(value.utf8.count, maximumStringBytes) + 2
            }
        }
        return bound
    }

    /// Room a whole line may take.
    static func bound(measurement: String, tags: [Point.Tag], fields: [Point.Field]) -> Int {
        var bound = nameBound(measurement) + fieldsBound(fields) + 24
        for tag in tags { bound += nameBound(tag.key) + nameBound(tag.value) + 2 }
        return bound
    }

    private func timestampValue(_ timestamp: Timestamp?) throws(LineProtocolError) -> Int64? {
        guard let timestamp else { return nil }
        guard let value = timestamp.value(in: precision) else {
            throw .timestampOutOfRange(timestamp, precision)
        }
        return value
    }

    /// Appends the written fields after a series of `seriesBytes`, dropping (and counting) those whose
    /// key is too long to follow it. Returns ``LineProtocolError/keyTooLong(_:)`` when none is left.
    private func appendFields(
        _ fields: [Point.Field],
        seriesBytes: Int,
        into buffer: inout ByteWriter,
        repairs: inout Repairs
    ) -> LineProtocolError? {
        var first = true
        var shortestTooLong = Int.max
        for index in fields.indices {
            guard Self.isWritten(fields, at: index) else {
                repairs.droppedFields += 1
                continue
            }
            let field = fields[index]
            let fieldStart = buffer.count
            if !first { buffer.append(UInt8(ascii: ",")) }
            let keyStart = buffer.count
            appendName(field.key, .fieldKey, into: &buffer)
            let keyLength = seriesBytes + (buffer.count - keyStart) + 4
            if keyLength > Self.maximumKeyLength {
                buffer.rewind(to: fieldStart)
                repairs.droppedFields += 1
                shortestTooLong = min(shortestTooLong, keyLength)
                continue
            }
            first = false
            if Self.needsRepair(field.key, .fieldKey) { repairs.repairedNames += 1 }
            buffer.append(UInt8(ascii: "="))
            switch field.value {
            case .string(let value):
                let outcome = appendStringValue(value, limit: Self.maximumStringBytes, into: &buffer)
                if outcome.truncated { repairs.truncatedStrings += 1 }
                if outcome.replacedLineBreaks { repairs.replacedLineBreaks += 1 }
            case .uint(let value) where writesUnsignedAsSigned && value > UInt64(Int64.max):
                repairs.clampedUnsigned += 1
                appendScalar(field.value, into: &buffer)
            default:
                appendScalar(field.value, into: &buffer)
            }
        }
        return first ? .keyTooLong(shortestTooLong) : nil
    }

    /// Writes a number or boolean as line protocol types it (`1.5`, `42i`, `42u`, `true`). Strings
    /// are the caller's: each path quotes them its own way.
    @inline(__always)
    func appendScalar(_ value: FieldValue, into buffer: inout ByteWriter) {
        switch value {
        case .float(let value):
            appendFloat(value, into: &buffer)
        case .int(let value):
            appendDecimal(value, into: &buffer)
            buffer.append(UInt8(ascii: "i"))
        case .uint(let value):
            if writesUnsignedAsSigned {
                appendDecimal(min(value, UInt64(Int64.max)), into: &buffer)
                buffer.append(UInt8(ascii: "i"))
            } else {
                appendDecimal(value, into: &buffer)
                buffer.append(UInt8(ascii: "u"))
            }
        case .bool(let value):
            if value {
                buffer.append(UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e"))
            } else {
                buffer.append(UInt8(ascii: "f"))
                buffer.append(UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e"))
            }
        case .string:
            break
        }
    }
}
