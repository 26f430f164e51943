extension LineEncoder {
    /// Appends one line for a prerendered series, with the fields `writeFields` adds: the fastest way
    /// to write many lines with the same fields, as nothing but the values is checked per line.
    ///
    /// `writeFields` may be called twice for one line (again with more room, for a line longer than
    /// 1 KiB): it must add the same fields.
    ///
    /// ```swift
    /// let duration = try FieldKey("duration_ms")
    /// let series = try SeriesKey(measurement: "apihealth_request", tags: [Point.Tag("host", "api.example.com")])
    /// try encoder.encode(series: series, timestamp: Timestamp(seconds: 1_700_000_000), into: &buffer) { fields in
    ///     fields.add(duration, 12.5)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - series: The measurement and tags, rendered once.
    ///   - timestamp: When the point happened, or `nil` for the server's time.
    ///   - buffer: The bytes the line is appended to.
    ///   - writeFields: Adds the fields.
    /// - Returns: What was repaired or left out (the series key's own repairs included).
    /// - Throws: ``LineProtocolError/noFields`` when no field was written,
    ///   ``LineProtocolError/keyTooLong(_:)`` when every field's key was too long for the series key,
    ///   ``LineProtocolError/timestampOutOfRange(_:_:)`` when the timestamp does not fit the precision.
    @discardableResult
    public func encode(
        series: SeriesKey,
        timestamp: Timestamp?,
        into buffer: inout [UInt8],
        fields writeFields: (inout FieldWriter) -> Void
    ) throws(LineProtocolError) -> Repairs {
        try encode(series: series, timestamp: timestamp, into: &buffer, claimingTimestamp: { $1 }, fields: writeFields)
    }

    /// Appends one line for a prerendered series, letting `adjust` change the timestamp.
    ///
    /// - Parameters:
    ///   - series: The measurement and tags, rendered once.
    ///   - timestamp: When the point happened, or `nil` for the server's time.
    ///   - buffer: The bytes the line is appended to.
    ///   - adjust: Given the series key and the timestamp in ``precision`` units, returns the timestamp
    ///     to write, or `nil` to decline the line.
    ///   - writeFields: Adds the fields.
    /// - Returns: What was repaired or left out (the series key's own repairs included).
    /// - Throws: ``LineProtocolError/noFields`` when no field was written,
    ///   ``LineProtocolError/keyTooLong(_:)`` when every field's key was too long for the series key,
    ///   ``LineProtocolError/timestampDeclined`` when `adjust` declined it.
    @available(
        *,
        deprecated,
        message:
            "use encode(series:timestamp:into:fields:): choosing a point's timestamp is the agent's rule, not the encoder's"
    )
    @discardableResult
    public func encode(
        series: SeriesKey,
        timestamp: Timestamp?,
        into buffer: inout [UInt8],
        adjustingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?,
        fields writeFields: (inout FieldWriter) -> Void
    ) throws(LineProtocolError) -> Repairs {
        try encode(series: series, timestamp: timestamp, into: &buffer, claimingTimestamp: adjust, fields: writeFields)
    }

    /// ``encode(series:timestamp:into:fields:)``, letting `adjust` change the timestamp (or decline the
    /// line): it is called once, when the fields are written and only the timestamp is left, and not
    /// at all for a line that fails otherwise. The agent uses it to keep two points of one series off
    /// the same instant.
    @discardableResult
    package func encode(
        series: SeriesKey,
        timestamp: Timestamp?,
        into buffer: inout [UInt8],
        claimingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?,
        fields writeFields: (inout FieldWriter) -> Void
    ) throws(LineProtocolError) -> Repairs {
        var value: Int64?
        if let timestamp {
            guard let given = timestamp.value(in: precision) else { throw .timestampOutOfRange(timestamp, precision) }
            value = given
        }
        return try encode(
            series: series,
            timestampValue: value,
            into: &buffer,
            claimingTimestamp: adjust,
            fields: writeFields
        )
    }

    /// ``encode(series:timestamp:into:claimingTimestamp:fields:)`` for a timestamp already converted
    /// to this encoder's precision (and checked to be in range), for a caller that needed the value
    /// before the line.
    package func encode(
        series: SeriesKey,
        timestampValue value: Int64?,
        into buffer: inout [UInt8],
        claimingTimestamp adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?,
        fields writeFields: (inout FieldWriter) -> Void
    ) throws(LineProtocolError) -> Repairs {
        // Short lines are written on the stack and copied once; a longer one gets the room it measured.
        let neededRoom: Int
        let first = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.stackLineBytes) { scratch in
            var writer = ByteWriter(base: scratch.baseAddress!, count: 0, end: Self.stackLineBytes)
            let outcome = writeLine(series: series, timestamp: value, adjust, into: &writer, writeFields)
            if case .written = outcome {
                buffer.appendCopy(of: UnsafeBufferPointer(start: scratch.baseAddress, count: writer.count))
            }
            return outcome
        }
        switch first {
        case .written(let repairs): return series.repairs + repairs
        case .failed(let error): throw error
        case .needsRoom(let room): neededRoom = room
        }
        let outcome = ByteWriter.writing(into: &buffer, bound: neededRoom) { writer in
            writeLine(series: series, timestamp: value, adjust, into: &writer, writeFields)
        }
        switch outcome {
        case .written(let repairs): return series.repairs + repairs
        case .failed(let error): throw error
        case .needsRoom:
            // The second attempt had the room the first one measured: `writeFields` added other fields.
            throw .noFields
        }
    }

    enum LineOutcome {
        case written(Repairs)
        case failed(LineProtocolError)
        case needsRoom(Int)
    }

    /// Writes the series, the fields and the timestamp (as `adjust` changes it, called only once the
    /// fields are written); on anything but `.written`, `writer` is back where it started.
    func writeLine(
        series: SeriesKey,
        timestamp: Int64?,
        _ adjust: (_ seriesKey: UnsafeBufferPointer<UInt8>, _ timestamp: Int64) -> Int64?,
        into writer: inout ByteWriter,
        _ writeFields: (inout FieldWriter) -> Void
    ) -> LineOutcome {
        let lineStart = writer.count
        let seriesBytes = series.bytes.count
        // Series, space, and the timestamp's space, 20 digits and sign, and the line feed.
        let fixedRoom = seriesBytes + 1 + 23
        let seriesFits = writer.hasRoom(fixedRoom)
        if seriesFits {
            series.bytes.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
            writer.append(UInt8(ascii: " "))
        }
        // Without room for the series, the fields are only measured.
        let fieldsEnd = seriesFits ? writer.end - 23 : writer.count
        var fields = FieldWriter(
            writer: ByteWriter(base: writer.base, count: writer.count, end: fieldsEnd),
            seriesBytes: seriesBytes,
            writesUnsignedAsSigned: writesUnsignedAsSigned
        )
        writeFields(&fields)
        if !seriesFits || fields.overflowed {
            writer.rewind(to: lineStart)
            return .needsRoom(fixedRoom + fields.needed + FieldKey.wordBytes)
        }
        if fields.count == 0 {
            writer.rewind(to: lineStart)
            return .failed(fields.shortestTooLong == Int.max ? .noFields : .keyTooLong(fields.shortestTooLong))
        }
        if let timestamp {
            guard let adjusted = series.bytes.withUnsafeBufferPointer({ adjust($0, timestamp) }) else {
                writer.rewind(to: lineStart)
                return .failed(.timestampDeclined)
            }
            writer.advance(by: fields.writer.count - writer.count)
            writer.append(UInt8(ascii: " "))
            appendDecimal(adjusted, into: &writer)
        } else {
            writer.advance(by: fields.writer.count - writer.count)
        }
        writer.append(UInt8(ascii: "\n"))
        return .written(fields.repairs)
    }
}
