/// A field key checked and escaped once, for lines whose fields a ``FieldWriter`` writes.
///
/// A service that writes the same fields on every line (the agent's request points do) names them
/// once; each line then copies the escaped key instead of checking and escaping it again.
///
/// ```swift
/// let duration = try FieldKey("duration_ms")
/// try encoder.encode(series: series, timestamp: now, into: &buffer) { fields in
///     fields.add(duration, 12.5)
/// }
/// ```
public struct FieldKey: Sendable, Hashable {
    /// The key as given.
    public let name: String
    /// The key as written, escaped.
    let escaped: [UInt8]
    /// The first 24 bytes of `escaped`, zero-padded: a key that fits is copied as three words.
    let words: (UInt64, UInt64, UInt64)
    /// One bit chosen by the key's bytes: two keys with different bits are different keys, so a
    /// writer only compares keys whose bits meet.
    let mark: UInt64

    /// Checks `name` once.
    ///
    /// - Parameter name: The field key.
    /// - Throws: ``LineProtocolError/unwritableFieldKey(_:)`` for a key the encoder would drop or
    ///   repair: empty, starting with `_`, `time`, or holding a backslash or a control character
    ///   InfluxDB cannot store.
    public init(_ name: String) throws(LineProtocolError) {
        guard LineEncoder.isWritableKey(name, .fieldKey), !LineEncoder.needsRepair(name, .fieldKey) else {
            throw .unwritableFieldKey(name)
        }
        self.name = name
        let escaped = ByteWriter.collect(bound: nameBound(name)) { appendName(name, .fieldKey, into: &$0) }
        self.escaped = escaped
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &words) { words in
            escaped.withUnsafeBytes {
                words.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(FieldKey.wordBytes)))
            }
        }
        self.words = words
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in escaped { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        self.mark = 1 << (hash >> 58)
    }

    /// How many bytes `words` holds.
    static let wordBytes = 24

    public static func == (lhs: FieldKey, rhs: FieldKey) -> Bool { lhs.escaped == rhs.escaped }
    public func hash(into hasher: inout Hasher) { hasher.combine(escaped) }
}

/// Writes the fields of one line, in the order they are added, for
/// ``LineEncoder/encode(series:timestamp:into:adjustingTimestamp:fields:)``.
///
/// Values get the encoder's documented treatment: a NaN or infinite float leaves its field out, a
/// string is cut at ``LineEncoder/maximumStringBytes`` and its line breaks become U+FFFD, an unsigned
/// value over `Int64.max` is clamped when the encoder writes unsigned values as signed, and a field
/// whose key is too long to follow the series key is left out; each is counted in the line's
/// ``LineEncoder/Repairs``. A key added twice to one line keeps its first value; the later ones are
/// left out and counted as dropped fields.
///
/// ```swift
/// try encoder.encode(series: series, timestamp: now, into: &buffer) { fields in
///     fields.add(durationKey, 12.5)
///     fields.add(statusKey, Int64(200))
///     fields.add(errorKey, "timed out")
/// }
/// ```
public struct FieldWriter: ~Copyable {
    var writer: ByteWriter
    /// Where the first field starts.
    let fieldsStart: Int
    let seriesBytes: Int
    let writesUnsignedAsSigned: Bool
    /// Fields written.
    var count = 0
    /// The marks of the keys written.
    var seen: UInt64 = 0
    /// Room the fields added so far need at most (written or not): the size of the second attempt
    /// when the first one's room ran out.
    var needed = 0
    /// The room ran out: nothing more is written, only measured.
    var overflowed = false
    var repairs = LineEncoder.Repairs()
    /// The shortest series key + field key + 4 of a field left out for passing the key length limit.
    private(set) var shortestTooLong = Int.max

    init(writer: ByteWriter, seriesBytes: Int, writesUnsignedAsSigned: Bool) {
        self.writer = writer
        self.fieldsStart = writer.count
        self.seriesBytes = seriesBytes
        self.writesUnsignedAsSigned = writesUnsignedAsSigned
    }

    /// A float field (`12.5`). NaN and ±infinity leave the field out.
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value.
    public mutating func add(_ key: FieldKey, _ value: Double) {
        guard value.isFinite else {
            repairs.droppedFields += 1
            return
        }
        guard startField(key, valueRoom: 32) else { return }
        appendFloat(value, into: &writer)
    }

    /// A float field given as a whole number of millionths: `12345678` is written `12.345678`, as
    /// `add(key, 12.345678)` writes it, without going through floating point. A duration in whole
    /// nanoseconds, given as millionths, is written in milliseconds.
    ///
    /// ```swift
    /// fields.add(durationKey, millionths: 12_345_678)  // duration_ms=12.345678
    /// ```
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value in millionths.
    public mutating func add(_ key: FieldKey, millionths value: Int64) {
        guard startField(key, valueRoom: Self.millionthsRoom) else { return }
        Self.appendMillionthsValue(value, into: &writer)
    }

    /// A signed integer field (`42i`).
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value.
    public mutating func add(_ key: FieldKey, _ value: Int64) {
        guard startField(key, valueRoom: Self.integerRoom) else { return }
        Self.appendSignedValue(value, into: &writer)
    }

    /// An unsigned integer field (`42u`, or `42i` when the encoder writes unsigned values as signed).
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value.
    public mutating func add(_ key: FieldKey, unsigned value: UInt64) {
        guard startField(key, valueRoom: Self.integerRoom) else { return }
        if Self.appendUnsignedValue(value, asSigned: writesUnsignedAsSigned, into: &writer) {
            repairs.clampedUnsigned += 1
        }
    }

    /// A boolean field (`true`, `false`).
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value.
    public mutating func add(_ key: FieldKey, _ value: Bool) {
        guard startField(key, valueRoom: Self.booleanRoom) else { return }
        Self.appendBooleanValue(value, into: &writer)
    }

    /// The most bytes a value of each kind is written in.
    static let millionthsRoom = 32
    static let integerRoom = 21
    static let booleanRoom = 5

    /// `12.345678` for 12,345,678 millionths.
    @inline(__always)
    static func appendMillionthsValue(_ value: Int64, into writer: inout ByteWriter) {
        // Below 2⁴³ millionths (about 100 days in nanoseconds) the float's shortest text is exactly
        // these digits; past it, the float path decides.
        guard value.magnitude < 1 << 43 else {
            appendFloat(Double(value) / 1_000_000, into: &writer)
            return
        }
        if value < 0 { writer.append(UInt8(ascii: "-")) }
        let (whole, fraction) = value.magnitude.quotientAndRemainder(dividingBy: 1_000_000)
        appendDecimal(whole, into: &writer)
        writer.append(UInt8(ascii: "."))
        appendMillionths(fraction, into: &writer)
    }

    @inline(__always)
    static func appendSignedValue(_ value: Int64, into writer: inout ByteWriter) {
        appendDecimal(value, into: &writer)
        writer.append(UInt8(ascii: "i"))
    }

    /// Writes `value`, as a signed integer when `asSigned`; `true` when it was clamped to `Int64.max`.
    @inline(__always)
    static func appendUnsignedValue(_ value: UInt64, asSigned: Bool, into writer: inout ByteWriter) -> Bool {
        if asSigned {
            appendDecimal(min(value, UInt64(Int64.max)), into: &writer)
            writer.append(UInt8(ascii: "i"))
            return value > UInt64(Int64.max)
        }
        appendDecimal(value, into: &writer)
        writer.append(UInt8(ascii: "u"))
        return false
    }

    @inline(__always)
    static func appendBooleanValue(_ value: Bool, into writer: inout ByteWriter) {
        if value {
            writer.append(UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e"))
        } else {
            writer.append(UInt8(ascii: "f"))
            writer.append(UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e"))
        }
    }

    /// A string field (`"timed out"`), escaped.
    ///
    /// - Parameters:
    ///   - key: The field key, checked when it was made.
    ///   - value: The value; longer than ``LineEncoder/maximumStringBytes`` is cut.
    public mutating func add(_ key: FieldKey, _ value: String) {
        withUTF8Bytes(value) { bytes in
            // A line break becomes the three bytes of U+FFFD.
            guard startField(key, valueRoom: 3 * min(bytes.count, LineEncoder.maximumStringBytes) + 2) else { return }
            let valueStart = writer.count
            if bytes.count <= LineEncoder.maximumStringBytes, copyStringValue(bytes, into: &writer) { return }
            writer.rewind(to: valueStart)
            let outcome = appendStringValue(value, limit: LineEncoder.maximumStringBytes, into: &writer)
            if outcome.truncated { repairs.truncatedStrings += 1 }
            if outcome.replacedLineBreaks { repairs.replacedLineBreaks += 1 }
        }
    }

    /// Writes `,key=` (or `key=` for the first field) when the field may be written and fits with a
    /// value of at most `valueRoom` bytes; `false` when it is left out (counted) or does not fit.
    @inline(__always)
    private mutating func startField(_ key: FieldKey, valueRoom: Int) -> Bool {
        let keyLength = seriesBytes + key.escaped.count + 4
        guard keyLength <= LineEncoder.maximumKeyLength else {
            repairs.droppedFields += 1
            shortestTooLong = min(shortestTooLong, keyLength)
            return false
        }
        let length = key.escaped.count
        let room = 1 + length + 1 + valueRoom
        needed += room
        // The key's three words are stored whole, so up to 24 bytes past it must be room too.
        if overflowed || !writer.hasRoom(room + FieldKey.wordBytes) {
            overflowed = true
            return false
        }
        if seen & key.mark != 0 && hasWritten(key) {
            repairs.droppedFields += 1
            return false
        }
        seen |= key.mark
        if count > 0 { writer.append(UInt8(ascii: ",")) }
        if length <= FieldKey.wordBytes {
            writer.append(words: key.words, count: length)
        } else {
            key.escaped.withUnsafeBufferPointer { writer.append(contentsOf: $0) }
        }
        writer.append(UInt8(ascii: "="))
        count += 1
        return true
    }

    /// Whether `key` is among the fields written, read back from the line: keys end at the first
    /// unescaped `=`, string values are quoted with `"` and `\` escaped, other values hold no comma.
    private func hasWritten(_ key: FieldKey) -> Bool {
        let base = writer.base
        let end = writer.count
        var index = fieldsStart
        while index < end {
            let keyStart = index
            while base[index] != UInt8(ascii: "=") { index += base[index] == UInt8(ascii: "\\") ? 2 : 1 }
            let found = key.escaped.withUnsafeBufferPointer { escaped in
                escaped.count == index - keyStart
                    && memcmpEqual(UnsafeBufferPointer(start: base + keyStart, count: index - keyStart), escaped)
            }
            if found { return true }
            index += 1
            if base[index] == UInt8(ascii: "\"") {
                index += 1
                while base[index] != UInt8(ascii: "\"") { index += base[index] == UInt8(ascii: "\\") ? 2 : 1 }
                index += 1
            } else {
                while index < end && base[index] != UInt8(ascii: ",") { index += 1 }
            }
            index += 1
        }
        return false
    }
}

extension LineEncoder.Repairs {
    static func + (lhs: LineEncoder.Repairs, rhs: LineEncoder.Repairs) -> LineEncoder.Repairs {
        var sum = lhs
        sum += rhs
        return sum
    }
}
