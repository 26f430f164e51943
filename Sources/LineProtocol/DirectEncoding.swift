/// The encoder's fast path: one pass over a point that needs no repair.
///
/// Nearly every point a service records is clean: names without backslashes or control characters,
/// distinct keys, finite floats. For those the line is written in a single pass that copies each name
/// and string eight bytes at a time while checking it for bytes that need escaping. The moment
/// anything needs the careful treatment the table in ``LineEncoder`` describes (a repair, a dropped tag
/// or field, an error), or the line outgrows its room, the pass gives up and leaves the buffer as it
/// found it; the caller then tries with more room, or takes the careful path. Both paths write the
/// same bytes for every point the fast one accepts; the tests check that.
extension LineEncoder {
    /// Lines up to this long are written on the stack first and copied to the buffer once.
    static let stackLineBytes = 1_024

    /// Appends `point` to `buffer` if it needs no repair: on the stack when the line is short, in room
    /// reserved in `buffer` otherwise. Returns `false`, having appended nothing, when it needs care.
    func appendDirectly(
        _ point: Point,
        timestamp: Int64?,
        to buffer: inout [UInt8],
        adjustingTimestamp adjust: (UnsafeBufferPointer<UInt8>, Int64) -> Int64?
    ) -> Bool {
        Self.appendDirectly(
            to: &buffer,
            bound: Self.directBound(measurement: point.measurement, tags: point.tags, fields: point.fields)
        ) { writer in
            encodeDirectly(point, timestamp: timestamp, into: &writer, adjustingTimestamp: adjust)
        }
    }

    /// Appends a line of `fields` after a prerendered series, as ``appendDirectly(_:timestamp:to:adjustingTimestamp:)``.
    func appendDirectly(fields: [Point.Field], timestamp: Int64?, series: SeriesKey, to buffer: inout [UInt8]) -> Bool {
        Self.appendDirectly(to: &buffer, bound: series.bytes.count + Self.directFieldsBound(fields) + 24) { writer in
            encodeDirectly(fields: fields, timestamp: timestamp, series: series, into: &writer)
        }
    }

    /// Runs `write` on the stack, then (if the line did not fit there) in `bound()` bytes reserved in
    /// `buffer`; the bound is only computed for lines longer than the stack room.
    @inline(__always)
    private static func appendDirectly(
        to buffer: inout [UInt8],
        bound: @autoclosure () -> Int,
        _ write: (inout ByteWriter) -> Bool
    ) -> Bool {
        let fitted = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: stackLineBytes) { scratch in
            var writer = ByteWriter(base: scratch.baseAddress!, count: 0, end: stackLineBytes)
            guard write(&writer) else { return false }
            buffer.append(contentsOf: UnsafeBufferPointer(start: scratch.baseAddress, count: writer.count))
            return true
        }
        if fitted { return true }
        let bound = bound()
        if bound <= stackLineBytes { return false }
        return ByteWriter.writing(into: &buffer, bound: bound, write)
    }

    /// Room the fast path may need: names at most doubled by escapes, values at their longest form.
    static func directBound(measurement: String, tags: [Point.Tag], fields: [Point.Field]) -> Int {
        var bound = 2 * measurement.utf8.count + 24
        for tag in tags { bound += 2 * (tag.key.utf8.count + tag.value.utf8.count) + 2 }
        return bound + directFieldsBound(fields)
    }

    static func directFieldsBound(_ fields: [Point.Field]) -> Int {
        var bound = 0
        for field in fields {
            bound += 2 * field.key.utf8.count + fieldValueRoom
            if case .string(let value) = field.value { bound += 2 * value.utf8.count }
        }
        return bound
    }

    /// Room a field's `=` and value take beyond its key (and a string's doubled bytes): the longest
    /// number, with room to spare for reading eight bytes past a short key.
    static let fieldValueRoom = 40

    /// Writes the whole line for `point`, or returns `false` with `writer` back where it started.
    func encodeDirectly(
        _ point: Point,
        timestamp: Int64?,
        into writer: inout ByteWriter,
        adjustingTimestamp adjust: (UnsafeBufferPointer<UInt8>, Int64) -> Int64?
    ) -> Bool {
        let lineStart = writer.count
        guard Self.writeMeasurementDirectly(point.measurement, into: &writer),
            Self.writeTagsDirectly(point.tags, into: &writer)
        else {
            writer.rewind(to: lineStart)
            return false
        }
        let series = UnsafeBufferPointer(start: writer.base + lineStart, count: writer.count - lineStart)
        return finishLineDirectly(point.fields, from: lineStart, into: &writer) {
            guard let timestamp else { return .some(nil) }
            return adjust(series, timestamp).map { .some($0) }
        }
    }

    /// Writes a line of `fields` after `series`, or returns `false` with `writer` back where it started.
    func encodeDirectly(
        fields: [Point.Field],
        timestamp: Int64?,
        series: SeriesKey,
        into writer: inout ByteWriter
    ) -> Bool {
        let lineStart = writer.count
        let copied = series.bytes.withUnsafeBufferPointer { bytes in
            guard writer.hasRoom(bytes.count + 1) else { return false }
            writer.append(contentsOf: bytes)
            return true
        }
        return copied && finishLineDirectly(fields, from: lineStart, into: &writer) { .some(timestamp) }
    }

    /// Writes ` fields timestamp\n` after the series; `timestamp` is asked for once the fields are
    /// written, and answers `nil` to decline the line, `.some(nil)` for a line without one. On `false`,
    /// `writer` is back at `lineStart`.
    private func finishLineDirectly(
        _ fields: [Point.Field],
        from lineStart: Int,
        into writer: inout ByteWriter,
        timestamp: () -> Int64??
    ) -> Bool {
        // The series may have filled the room exactly (512 commas escape to the 1,024 bytes of stack).
        guard writer.hasRoom(1) else {
            writer.rewind(to: lineStart)
            return false
        }
        let seriesBytes = writer.count - lineStart
        writer.append(UInt8(ascii: " "))
        guard writeFieldsDirectly(fields, seriesBytes: seriesBytes, into: &writer), writer.hasRoom(22),
            case .some(let timestamp) = timestamp()
        else {
            writer.rewind(to: lineStart)
            return false
        }
        if let timestamp {
            writer.append(UInt8(ascii: " "))
            appendDecimal(timestamp, into: &writer)
        }
        writer.append(UInt8(ascii: "\n"))
        return true
    }

    static func writeMeasurementDirectly(_ measurement: String, into writer: inout ByteWriter) -> Bool {
        withUTF8Bytes(measurement) { bytes in
            guard let first = bytes.first, first != UInt8(ascii: "_"), first != UInt8(ascii: "#"),
                writer.hasRoom(2 * bytes.count)
            else { return false }
            return copyName(bytes, .measurement, into: &writer)
        }
    }

    /// Writes `,key=value` for each tag in key order; `false` if a tag would be dropped or repaired.
    static func writeTagsDirectly(_ tags: [Point.Tag], into writer: inout ByteWriter) -> Bool {
        let count = tags.count
        if count == 0 { return true }
        if count > 64 { return false }
        return withUnsafeTemporaryAllocation(of: (prefix: UInt64, index: Int).self, capacity: count) { order in
            for index in 0..<count {
                order[index] = (withUTF8Bytes(tags[index].key, sortPrefix), index)
            }
            // Insertion sort on the first eight bytes, the whole keys only on a tie: tags are few.
            for position in 1..<count {
                let moving = order[position]
                var slot = position
                while slot > 0 {
                    let before = order[slot - 1]
                    if before.prefix < moving.prefix { break }
                    if before.prefix == moving.prefix {
                        let left = tags[before.index].key
                        let right = tags[moving.index].key
                        // Equal keys: the careful path keeps the last one.
                        if sameBytes(left, right) { return false }
                        if precedes(left, right) { break }
                    }
                    order[slot] = before
                    slot -= 1
                }
                order[slot] = moving
            }
            for position in 0..<count {
                let tag = tags[order[position].index]
                guard writer.hasRoom(1) else { return false }
                writer.append(UInt8(ascii: ","))
                guard writeKeyDirectly(tag.key, .tag, into: &writer) else { return false }
                writer.append(UInt8(ascii: "="))
                let written = withUTF8Bytes(tag.value) { bytes in
                    !bytes.isEmpty && writer.hasRoom(2 * bytes.count) && copyName(bytes, .tag, into: &writer)
                }
                guard written else { return false }
            }
            return true
        }
    }

    /// Writes a tag key or field key and leaves room for what follows it (`=` and a number);
    /// `false` for an empty or reserved key, one that needs repair, or one that does not fit.
    @inline(__always)
    static func writeKeyDirectly(_ key: String, _ position: NamePosition, into writer: inout ByteWriter) -> Bool {
        withUTF8Bytes(key) { bytes in
            guard let first = bytes.first, first != UInt8(ascii: "_"),
                writer.hasRoom(2 * bytes.count + fieldValueRoom)
            else { return false }
            if bytes.count == 4 && first == UInt8(ascii: "t") && bytes[1] == UInt8(ascii: "i")
                && bytes[2] == UInt8(ascii: "m") && bytes[3] == UInt8(ascii: "e")
            {
                return false
            }
            return copyName(bytes, position, into: &writer)
        }
    }

    /// Writes `key=value` pairs in order; `false` if a field would be dropped or a value changed, or
    /// a key is too long to follow a series of `seriesBytes` (``LineEncoder/maximumKeyLength``).
    func writeFieldsDirectly(_ fields: [Point.Field], seriesBytes: Int, into writer: inout ByteWriter) -> Bool {
        let count = fields.count
        if count == 0 { return false }
        return withUnsafeTemporaryAllocation(of: (prefix: UInt64, start: Int, count: Int).self, capacity: count) {
            keys in
            for index in 0..<count {
                if index > 0 {
                    guard writer.hasRoom(1) else { return false }
                    writer.append(UInt8(ascii: ","))
                }
                let keyStart = writer.count
                guard Self.writeKeyDirectly(fields[index].key, .fieldKey, into: &writer),
                    seriesBytes + (writer.count - keyStart) + 4 <= Self.maximumKeyLength
                else { return false }
                keys[index] = (writer.prefix(from: keyStart), keyStart, writer.count - keyStart)
                writer.append(UInt8(ascii: "="))
                switch fields[index].value {
                case .float(let value) where !value.isFinite:
                    return false
                case .uint(let value) where writesUnsignedAsSigned && value > UInt64(Int64.max):
                    return false
                case .string(let value):
                    let written = withUTF8Bytes(value) { bytes in
                        bytes.count <= Self.maximumStringBytes && writer.hasRoom(2 * bytes.count + 2)
                            && copyStringValue(bytes, into: &writer)
                    }
                    guard written else { return false }
                case let value:
                    appendScalar(value, into: &writer)
                }
            }
            // A key written twice: the careful path keeps the last. Keys are compared as written,
            // which is exact because escaping is one-to-one.
            for later in 1..<max(count, 1) {
                let key = keys[later]
                for earlier in 0..<later where keys[earlier].prefix == key.prefix && keys[earlier].count == key.count {
                    if key.count <= 8 || writer.sameBytes(at: keys[earlier].start, key.start, count: key.count) {
                        return false
                    }
                }
            }
            return true
        }
    }
}

/// The first eight bytes of `bytes`, big-endian and zero-padded: comparing two such prefixes orders
/// the byte strings as far as they go.
@inline(__always)
func sortPrefix(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
    let source = UnsafeRawPointer(base)
    let count = bytes.count
    if count >= 8 {
        return UInt64(bigEndian: source.loadUnaligned(as: UInt64.self))
    }
    if count >= 4 {
        // Two overlapping halves; the bytes they share are the same, so or-ing them is exact.
        let low = UInt64(UInt32(bigEndian: source.loadUnaligned(as: UInt32.self)))
        let high = UInt64(UInt32(bigEndian: source.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)))
        return low << 32 | high << (8 * UInt64(8 - count))
    }
    let middle = count >> 1
    return UInt64(bytes[0]) << 56 | UInt64(bytes[middle]) << UInt64(56 - 8 * middle)
        | UInt64(bytes[count - 1]) << UInt64(56 - 8 * (count - 1))
}

/// Nonzero when some byte of `word` is a control character, a space, a comma, a backslash or DEL, or
/// (outside measurements) `=`, or (in field keys) `"`: the bytes a name cannot be copied with as it is. Bytes of 0x80 and
/// above (UTF-8 beyond ASCII) are never flagged.
@inline(__always)
private func nameSpecials(in word: UInt64, _ position: NamePosition) -> UInt64 {
    let low7 = word & repeatedLowBits
    // At least 0x21: not a control character or space.
    var plain = low7 &+ (repeatedOnes &* (0x80 - 0x21))
    plain &=
        differs(low7, from: UInt8(ascii: ",")) & differs(low7, from: UInt8(ascii: "\\")) & differs(low7, from: 0x7F)
    if position != .measurement { plain &= differs(low7, from: UInt8(ascii: "=")) }
    if position == .fieldKey { plain &= differs(low7, from: UInt8(ascii: "\"")) }
    return matches(word, plain: plain)
}

/// Nonzero when some byte of `word` is `"` or a backslash, which a string value escapes, or a line
/// feed or carriage return, which it replaces.
@inline(__always)
private func stringSpecials(in word: UInt64) -> UInt64 {
    let low7 = word & repeatedLowBits
    let plain =
        differs(low7, from: UInt8(ascii: "\"")) & differs(low7, from: UInt8(ascii: "\\"))
        & differs(low7, from: 0x0A) & differs(low7, from: 0x0D)
    return matches(word, plain: plain)
}

/// Copies `bytes` to the writer's end without counting them as written, and reports whether any
/// byte is one `specials` flags. Words are copied whole, the last overlapping the one before, so every
/// byte is checked once or twice and copied without a loop over bytes.
@inline(__always)
private func copyChecking(
    _ bytes: UnsafeBufferPointer<UInt8>,
    to writer: ByteWriter,
    _ specials: (UInt64) -> UInt64
) -> Bool {
    let count = bytes.count
    guard let base = bytes.baseAddress, count > 0 else { return true }
    let source = UnsafeRawPointer(base)
    let destination = UnsafeMutableRawPointer(writer.base + writer.count)
    if count >= 8 {
        var offset = 0
        var found: UInt64 = 0
        while true {
            let word = source.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            found |= specials(word)
            destination.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
            if offset == count - 8 { return found == 0 }
            offset = min(offset + 8, count - 8)
        }
    }
    if count >= 4 {
        let low = source.loadUnaligned(as: UInt32.self)
        let high = source.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
        destination.storeBytes(of: low, as: UInt32.self)
        destination.storeBytes(of: high, toByteOffset: count - 4, as: UInt32.self)
        return specials(UInt64(low) | UInt64(high) << 32) == 0
    }
    // One to three bytes: the first, middle and last cover them all. The rest of the word is filled
    // with a letter, which no check flags.
    let middle = count >> 1
    destination.storeBytes(of: bytes[0], as: UInt8.self)
    destination.storeBytes(of: bytes[middle], toByteOffset: middle, as: UInt8.self)
    destination.storeBytes(of: bytes[count - 1], toByteOffset: count - 1, as: UInt8.self)
    let word = 0x6161_6161_6100_0000 | UInt64(bytes[0]) | UInt64(bytes[middle]) << 8 | UInt64(bytes[count - 1]) << 16
    return specials(word) == 0
}

/// Copies a name, escaping what `position` escapes. Returns `false` (with `writer` wherever it got to)
/// when the name holds a backslash or a control character InfluxDB cannot store there, which the
/// careful path repairs. The caller has checked there is room for twice its bytes.
@inline(__always)
private func copyName(
    _ bytes: UnsafeBufferPointer<UInt8>,
    _ position: NamePosition,
    into writer: inout ByteWriter
) -> Bool {
    if copyChecking(bytes, to: writer, { nameSpecials(in: $0, position) }) {
        writer.advance(by: bytes.count)
        return true
    }
    for (index, byte) in bytes.enumerated() {
        if byte == UInt8(ascii: "\\") || position.replaces(byte, at: index) { return false }
        if position.needsEscape(byte) { writer.append(UInt8(ascii: "\\")) }
        writer.append(byte)
    }
    return true
}

/// Copies a string field value in quotes, escaping `"` and backslashes. The caller has checked the
/// room (twice the bytes and two quotes) and the length. Returns `false` (with `writer` wherever it got
/// to) for a value with a line break, which the careful path replaces.
@inline(__always)
func copyStringValue(_ bytes: UnsafeBufferPointer<UInt8>, into writer: inout ByteWriter) -> Bool {
    writer.append(UInt8(ascii: "\""))
    if copyChecking(bytes, to: writer, stringSpecials) {
        writer.advance(by: bytes.count)
    } else {
        for byte in bytes {
            if byte == 0x0A || byte == 0x0D { return false }
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { writer.append(UInt8(ascii: "\\")) }
            writer.append(byte)
        }
    }
    writer.append(UInt8(ascii: "\""))
    return true
}
