/// One line written by `LineEncoder.withLine(_:_:)` or
/// `LineEncoder.withLine(series:timestampValue:fields:_:)`, lent to its caller: the bytes, `\n`
/// included, with the point's own timestamp; the length of the series key they start with; and the
/// timestamp, for a caller that keeps two points of one series off the same instant
/// (`rewritingTimestamp(_:into:)` writes the line with another).
package struct EncodedLine {
    /// The whole line, valid only inside the closure it is lent to.
    package let bytes: UnsafeBufferPointer<UInt8>
    /// The escaped measurement and tags at the start of `bytes` (0 for a line without a timestamp).
    package let seriesKeyBytes: Int
    /// The timestamp written at the end, in the encoder's precision (`nil`: the server's time).
    package let timestamp: Int64?
    /// What was repaired or left out.
    package let repairs: LineEncoder.Repairs

    /// A line of `bytes` (`\n` included) whose first `seriesKeyBytes` are its series key and which
    /// ends with `timestamp`, if it has one.
    package init(
        bytes: UnsafeBufferPointer<UInt8>,
        seriesKeyBytes: Int,
        timestamp: Int64?,
        repairs: LineEncoder.Repairs = LineEncoder.Repairs()
    ) {
        self.bytes = bytes
        self.seriesKeyBytes = seriesKeyBytes
        self.timestamp = timestamp
        self.repairs = repairs
    }

    /// The series key the line starts with.
    package var seriesKey: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[..<seriesKeyBytes]) }

    /// Appends the line to `buffer` with `timestamp` in place of its own (which it must have).
    package func rewritingTimestamp(_ timestamp: Int64, into buffer: inout [UInt8]) {
        // The timestamp is the last field of the line, and holds no space.
        var end = bytes.count - 1
        while end > 0, bytes[end - 1] != UInt8(ascii: " ") { end -= 1 }
        buffer.appendCopy(of: UnsafeBufferPointer(rebasing: bytes[..<end]))
        ByteWriter.writing(into: &buffer, bound: 22) { writer in
            appendDecimal(timestamp, into: &writer)
            writer.append(UInt8(ascii: "\n"))
        }
    }
}

extension LineEncoder {
    /// Writes `point` as one line, as `encode(_:into:)` does, into room of its own (on the stack when
    /// it is short and needs no repair) and lends it to `take`: for a caller that copies it on under
    /// a lock, so that nothing but the copy is done while the lock is held.
    ///
    /// - Returns: What `take` returned.
    /// - Throws: `LineProtocolError` when the point cannot be written; `take` is not called then.
    package func withLine(_ point: Point, _ take: (EncodedLine) -> Bool) throws(LineProtocolError) -> Bool {
        var seriesKeyBytes = 0
        var timestamp: Int64?
        let value = point.timestamp.map { $0.value(in: precision) }
        // A timestamp out of range is the careful path's to report, after the measurement's errors.
        if value != .some(nil) {
            var taken = false
            let written = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.stackLineBytes) { scratch in
                var writer = ByteWriter(base: scratch.baseAddress!, count: 0, end: Self.stackLineBytes)
                let direct = encodeDirectly(point, timestamp: value ?? nil, into: &writer) { seriesKey, value in
                    seriesKeyBytes = seriesKey.count
                    timestamp = value
                    return value
                }
                guard direct else { return false }
                let line = EncodedLine(
                    bytes: UnsafeBufferPointer(start: scratch.baseAddress, count: writer.count),
                    seriesKeyBytes: seriesKeyBytes,
                    timestamp: timestamp,
                    repairs: Repairs()
                )
                taken = take(line)
                return true
            }
            if written { return taken }
        }
        var bytes: [UInt8] = []
        let repairs = try encode(
            point,
            into: &bytes,
            claimingTimestamp: { seriesKey, value in
                seriesKeyBytes = seriesKey.count
                timestamp = value
                return value
            }
        )
        return bytes.withUnsafeBufferPointer { line in
            take(EncodedLine(bytes: line, seriesKeyBytes: seriesKeyBytes, timestamp: timestamp, repairs: repairs))
        }
    }

    /// Writes one line for a prerendered series, as `encode(series:timestamp:into:fields:)` does
    /// (`writeFields` may be called twice), into room of its own (on the stack for a line up to
    /// 1 KiB) and lends it to `take`, as `withLine(_:_:)` does.
    ///
    /// - Returns: What `take` returned.
    /// - Throws: `LineProtocolError` when the line cannot be written; `take` is not called then.
    package func withLine(
        series: SeriesKey,
        timestampValue value: Int64?,
        fields writeFields: (inout FieldWriter) -> Void,
        _ take: (EncodedLine) -> Bool
    ) throws(LineProtocolError) -> Bool {
        let seriesKeyBytes = series.bytes.count
        var taken = false
        let first = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.stackLineBytes) { scratch in
            var writer = ByteWriter(base: scratch.baseAddress!, count: 0, end: Self.stackLineBytes)
            let outcome = writeLine(series: series, timestamp: value, { $1 }, into: &writer, writeFields)
            if case .written(let repairs) = outcome {
                taken = take(
                    EncodedLine(
                        bytes: UnsafeBufferPointer(start: scratch.baseAddress, count: writer.count),
                        seriesKeyBytes: seriesKeyBytes,
                        timestamp: value,
                        repairs: series.repairs + repairs
                    )
                )
            }
            return outcome
        }
        let neededRoom: Int
        switch first {
        case .written: return taken
        case .failed(let error): throw error
        case .needsRoom(let room): neededRoom = room
        }
        var bytes: [UInt8] = []
        let outcome = ByteWriter.writing(into: &bytes, bound: neededRoom) { writer in
            writeLine(series: series, timestamp: value, { $1 }, into: &writer, writeFields)
        }
        switch outcome {
        case .written(let repairs):
            return bytes.withUnsafeBufferPointer { line in
                take(
                    EncodedLine(
                        bytes: line,
                        seriesKeyBytes: seriesKeyBytes,
                        timestamp: value,
                        repairs: series.repairs + repairs
                    )
                )
            }
        case .failed(let error): throw error
        case .needsRoom:
            // The second attempt had the room the first one measured: `writeFields` added other fields.
            throw .noFields
        }
    }
}
