/// Where a name or value stands in a line: each position escapes a different set of bytes.
enum NamePosition {
    /// The measurement.
    case measurement
    /// A tag key or tag value.
    case tag
    /// A field key.
    case fieldKey

    /// Whether the encoder writes `byte` with a backslash before it: the specification's escapes, and a
    /// quote in a field key. InfluxDB reads `\"` there as the quote; VictoriaMetrics, which takes a raw
    /// quote in a field key for the start of a string and refuses the line, reads it (with its
    /// backslash) without error.
    @inline(__always)
    func needsEscape(_ byte: UInt8) -> Bool {
        switch self {
        case .measurement: return byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ")
        case .tag:
            return byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "=")
        case .fieldKey:
            return byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "=")
                || byte == UInt8(ascii: "\"")
        }
    }

    /// Whether InfluxDB reads a backslash before `byte` as an escape, dropping the backslash. This is
    /// wider than the specification: a measurement also unescapes `=` and `"`, a field key `"`.
    @inline(__always)
    func readsAsEscape(_ byte: UInt8) -> Bool {
        switch self {
        case .measurement, .fieldKey:
            return byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "=")
                || byte == UInt8(ascii: "\"")
        case .tag:
            return byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "=")
        }
    }
}

extension NamePosition {
    /// Whether `byte`, at `index` in a name, is one InfluxDB cannot store there, so the encoder writes
    /// U+FFFD instead: a line feed or carriage return anywhere (one point is one line, for every
    /// reader), and a NUL or tab first in a measurement or field key (InfluxDB skips them there as
    /// whitespace). Every other control character, tabs included, is stored exactly and written as is.
    @inline(__always)
    func replaces(_ byte: UInt8, at index: Int) -> Bool {
        if byte == 0x0A || byte == 0x0D { return true }
        return index == 0 && (byte == 0x00 || byte == 0x09) && self != .tag
    }
}

/// The byte sequence that replaces a byte a name cannot hold: U+FFFD in UTF-8.
let replacementCharacterUTF8: (UInt8, UInt8, UInt8) = (0xEF, 0xBF, 0xBD)

@inline(__always)
func isControl(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte == 0x7F
}

/// Runs `body` with `string`'s UTF-8: a native string lends its bytes without a copy (or a retain),
/// any other is copied once. Inlinable, so other modules of the package avoid a generic call too.
@inlinable @inline(__always)
package func withUTF8Bytes<R>(_ string: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = string.utf8.withContiguousStorageIfAvailable(body) {
        return result
    }
    var copy = string
    return copy.withUTF8(body)
}

/// How a name (measurement, tag key, tag value, field key) must be repaired before it can be written.
///
/// InfluxDB reads a backslash before a character the position escapes (or before the end) as an escape
/// of that delimiter, so such runs of backslashes cannot be written: they are removed. The few control
/// characters ``NamePosition/replaces(_:at:)`` names cannot be stored: each is replaced by U+FFFD.
struct NameShape {
    /// Bytes of the name kept, before escaping and replacement.
    var keptBytes: Int
    var removedBackslashes: Int
    var controlCharacters: Int

    var isEmpty: Bool { keptBytes == 0 }
    var needsRepair: Bool { removedBackslashes > 0 || controlCharacters > 0 }

    init(_ string: String, _ position: NamePosition) {
        var kept = 0
        var removed = 0
        var controls = 0
        withUTF8Bytes(string) { bytes in
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\\") {
                    let runEnd = endOfBackslashRun(bytes, from: index)
                    if runEnd == bytes.count || position.readsAsEscape(bytes[runEnd]) {
                        removed += runEnd - index
                    } else {
                        kept += runEnd - index
                    }
                    index = runEnd
                    continue
                }
                if position.replaces(byte, at: index) { controls += 1 }
                kept += 1
                index += 1
            }
        }
        keptBytes = kept
        removedBackslashes = removed
        controlCharacters = controls
    }
}

@inline(__always)
func endOfBackslashRun(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
    var end = start
    while end < bytes.count && bytes[end] == UInt8(ascii: "\\") { end += 1 }
    return end
}

/// Appends `string` escaped for `position`, repaired as ``NameShape`` describes: backslash runs before
/// an escaped character or the end removed, the control characters InfluxDB cannot store replaced by
/// U+FFFD, and the position's special bytes preceded by a backslash.
@inline(__always)
func appendName(_ string: String, _ position: NamePosition, into buffer: inout ByteWriter) {
    withUTF8Bytes(string) { bytes in
        var plain = true
        for byte in bytes where byte == UInt8(ascii: "\\") || isControl(byte) || position.needsEscape(byte) {
            plain = false
            break
        }
        if plain {
            buffer.append(contentsOf: bytes)
            return
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\") {
                let runEnd = endOfBackslashRun(bytes, from: index)
                if runEnd < bytes.count && !position.readsAsEscape(bytes[runEnd]) {
                    buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<runEnd]))
                }
                index = runEnd
                continue
            }
            if position.needsEscape(byte) {
                buffer.append(UInt8(ascii: "\\"))
                buffer.append(byte)
            } else if position.replaces(byte, at: index) {
                buffer.append(replacementCharacterUTF8.0)
                buffer.append(replacementCharacterUTF8.1)
                buffer.append(replacementCharacterUTF8.2)
            } else {
                buffer.append(byte)
            }
            index += 1
        }
    }
}

/// Appends a string field value in quotes, escaping `"` and `\`, cut to at most `limit` bytes of UTF-8
/// on a scalar boundary, with each line feed and carriage return written as U+FFFD (so a point is one
/// line for every reader). Returns whether it was cut and whether a line break was replaced.
@inline(__always)
func appendStringValue(
    _ string: String,
    limit: Int,
    into buffer: inout ByteWriter
) -> (truncated: Bool, replacedLineBreaks: Bool) {
    buffer.append(UInt8(ascii: "\""))
    let outcome = withUTF8Bytes(string) { bytes -> (Bool, Bool) in
        var end = bytes.count
        if end > limit {
            end = limit
            // Step back over continuation bytes so the cut falls on a scalar boundary.
            while end > 0 && bytes[end] & 0xC0 == 0x80 { end -= 1 }
        }
        var replaced = false
        var runStart = 0
        for index in 0..<end {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                buffer.append(UInt8(ascii: "\\"))
                runStart = index
            } else if byte == 0x0A || byte == 0x0D {
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                buffer.append(replacementCharacterUTF8.0)
                buffer.append(replacementCharacterUTF8.1)
                buffer.append(replacementCharacterUTF8.2)
                runStart = index + 1
                replaced = true
            }
        }
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<end]))
        return (end < bytes.count, replaced)
    }
    buffer.append(UInt8(ascii: "\""))
    return (outcome.0, outcome.1)
}

/// Appends the decimal digits of `value`.
@inline(__always)
func appendDecimal(_ value: UInt64, into buffer: inout ByteWriter) {
    if value < 10 {
        buffer.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
        return
    }
    // Four digits at a time (two pairs, each stored as one 16-bit word), written backwards from the
    // end of the number.
    let width = decimalWidth(value)
    let pairs = UnsafeRawPointer(digitPairs.utf8Start)
    let digits = UnsafeMutableRawPointer(buffer.base + buffer.count)
    /// Stores the two digits of `pair` (below 100) to end at `end`.
    @inline(__always) func store(_ pair: Int, endingAt end: Int) {
        let text = pairs.loadUnaligned(fromByteOffset: pair &* 2, as: UInt16.self)
        digits.storeBytes(of: text, toByteOffset: end &- 2, as: UInt16.self)
    }
    var end = width
    var rest = value
    while rest >= 10_000 {
        let (quotient, remainder) = rest.quotientAndRemainder(dividingBy: 10_000)
        let (high, low) = UInt32(truncatingIfNeeded: remainder).quotientAndRemainder(dividingBy: 100)
        store(Int(low), endingAt: end)
        store(Int(high), endingAt: end &- 2)
        end &-= 4
        rest = quotient
    }
    if rest >= 100 {
        let (quotient, remainder) = rest.quotientAndRemainder(dividingBy: 100)
        store(Int(remainder), endingAt: end)
        end &-= 2
        rest = quotient
    }
    if rest >= 10 {
        store(Int(rest), endingAt: end)
    } else {
        let digit = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        digits.storeBytes(of: digit, toByteOffset: end &- 1, as: UInt8.self)
    }
    buffer.advance(by: width)
}

/// "00" through "99", for writing two digits at once.
private let digitPairs: StaticString =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

@inline(__always)
func appendDecimal(_ value: Int64, into buffer: inout ByteWriter) {
    if value < 0 {
        buffer.append(UInt8(ascii: "-"))
        appendDecimal(value.magnitude, into: &buffer)
    } else {
        appendDecimal(UInt64(value), into: &buffer)
    }
}

/// Appends a finite double as text that reads back to exactly the same value.
///
/// Values that are a whole number of millionths below 2⁵³ millionths (every duration in milliseconds
/// from a nanosecond clock) are written with integer arithmetic, `12.345678`; the rest use Swift's
/// shortest round-trip text (`1e-05`, `1.7976931348623157e+308`).
@inline(__always)
func appendFloat(_ value: Double, into buffer: inout ByteWriter) {
    let product = value * 1_000_000
    // Rounded by conversion (half away from zero), not `rounded()`: this module links no libm.
    if product.magnitude < 9_007_199_254_740_992, value != 0 || value.sign == .plus,
        case let micros = Int64(product + (product < 0 ? -0.5 : 0.5)), Double(micros) / 1_000_000 == value
    {
        // The decimal n / 10⁶ reads back as the double nearest to it, which is what dividing computes.
        if micros < 0 { buffer.append(UInt8(ascii: "-")) }
        let (whole, fraction) = micros.magnitude.quotientAndRemainder(dividingBy: 1_000_000)
        appendDecimal(whole, into: &buffer)
        buffer.append(UInt8(ascii: "."))
        appendMillionths(fraction, into: &buffer)
        return
    }
    let text = value.description
    withUTF8Bytes(text) { bytes in
        buffer.append(contentsOf: bytes)
    }
}

/// Writes `fraction` (below 10⁶) as the digits after a decimal point: six digits without their
/// trailing zeros (`345000` → `345`, `5` → `000005`), or `0` for zero. The six are written two at a
/// time, then the zeros at the end are taken back.
@inline(__always)
func appendMillionths(_ fraction: UInt64, into buffer: inout ByteWriter) {
    if fraction == 0 {
        buffer.append(UInt8(ascii: "0"))
        return
    }
    let pairs = digitPairs.utf8Start
    let (high, low) = fraction.quotientAndRemainder(dividingBy: 10_000)
    let (middle, last) = low.quotientAndRemainder(dividingBy: 100)
    let start = buffer.count
    let first = Int(truncatingIfNeeded: high) &* 2
    let second = Int(truncatingIfNeeded: middle) &* 2
    let third = Int(truncatingIfNeeded: last) &* 2
    buffer.append(pairs[first], pairs[first &+ 1], pairs[second], pairs[second &+ 1])
    buffer.append(pairs[third])
    buffer.append(pairs[third &+ 1])
    var end = start + 6
    while buffer.base[end - 1] == UInt8(ascii: "0") { end -= 1 }
    buffer.rewind(to: end)
}

@inline(__always)
func decimalWidth(_ value: UInt64) -> Int {
    // Approximate from the bit length (log10(2) ≈ 1233 / 4096), then correct by one comparison.
    let bits = 64 - value.leadingZeroBitCount
    let estimate = (bits &* 1233) >> 12
    return max(estimate + (value >= powersOfTen[estimate] ? 1 : 0), 1)
}

private let powersOfTen: [UInt64] = [
    1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000,
    100_000_000_000, 1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000, 1_000_000_000_000_000,
    10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
]

/// Writes bytes into memory reserved beforehand: the encoder's bound guarantees the room, so writes
/// need no capacity or uniqueness checks (and a position within that room cannot overflow, so it
/// moves by wrapping arithmetic).
struct ByteWriter {
    let base: UnsafeMutablePointer<UInt8>
    private(set) var count: Int
    /// How far the reserved room goes.
    let end: Int

    init(base: UnsafeMutablePointer<UInt8>, count: Int, end: Int) {
        self.base = base
        self.count = count
        self.end = end
    }

    /// Whether `length` more bytes fit (the encoder's fast path checks; its bound-sized paths need not).
    @inline(__always)
    func hasRoom(_ length: Int) -> Bool { end - count >= length }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        base[count] = byte
        count &+= 1
    }

    @inline(__always)
    mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        (base + count).update(from: source, count: bytes.count)
        count &+= bytes.count
    }

    /// Stores all three words at the end and counts the first `count` bytes of them as written; the
    /// caller has checked there is room for all 24.
    @inline(__always)
    mutating func append(words: (UInt64, UInt64, UInt64), count length: Int) {
        let destination = UnsafeMutableRawPointer(base + count)
        destination.storeBytes(of: words.0, as: UInt64.self)
        destination.storeBytes(of: words.1, toByteOffset: 8, as: UInt64.self)
        destination.storeBytes(of: words.2, toByteOffset: 16, as: UInt64.self)
        count &+= length
    }

    /// Forgets everything written after `position`.
    @inline(__always)
    mutating func rewind(to position: Int) { count = position }

    /// Counts `length` bytes stored directly at the end as written.
    @inline(__always)
    mutating func advance(by length: Int) { count &+= length }

    /// Up to eight bytes written since `start`, as one word that differs for different bytes.
    /// The room reserved after them makes the eight-byte load safe.
    @inline(__always)
    func prefix(from start: Int) -> UInt64 {
        let word = UnsafeRawPointer(base + start).loadUnaligned(as: UInt64.self)
        let length = count - start
        return length >= 8 ? word : word & ((1 << (8 * UInt64(length))) &- 1)
    }

    /// Whether the `count` bytes written at `first` equal those at `second`.
    @inline(__always)
    func sameBytes(at first: Int, _ second: Int, count: Int) -> Bool {
        memcmpEqual(
            UnsafeBufferPointer(start: base + first, count: count),
            UnsafeBufferPointer(start: base + second, count: count)
        )
    }

    @inline(__always)
    mutating func append(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        base[count] = a
        base[count &+ 1] = b
        base[count &+ 2] = c
        base[count &+ 3] = d
        count &+= 4
    }

    /// Runs `body` with a writer over room for `bound` more bytes at the end of `buffer`, then keeps
    /// only what was written.
    @inline(__always)
    static func writing<Result>(
        into buffer: inout [UInt8],
        bound: Int,
        _ body: (inout ByteWriter) -> Result
    ) -> Result {
        let start = buffer.count
        // Growing by appending keeps the array's geometric growth (reserveCapacity would reallocate to
        // the exact size on every line, copying the whole buffer each time).
        var written = start
        buffer.appendZeros(bound)
        let value = buffer.withUnsafeMutableBufferPointer { pointer -> Result in
            var writer = ByteWriter(base: pointer.baseAddress!, count: start, end: start + bound)
            let value = body(&writer)
            written = writer.count
            return value
        }
        buffer.removeLast(buffer.count - written)
        return value
    }

    /// The bytes `body` writes, in a new array (for the rare paths that repair names).
    static func collect(bound: Int, _ body: (inout ByteWriter) -> Void) -> [UInt8] {
        var bytes: [UInt8] = []
        writing(into: &bytes, bound: bound, body)
        return bytes
    }
}

extension Array where Element == UInt8 {
    /// Appends `count` zero bytes in one fill, growing the array as appending grows it (the generic
    /// `append(contentsOf: repeatElement(0, count:))` goes element by element through the sequence's
    /// iterator wherever it is not specialized: in a debug build, most of the time of encoding a line).
    @inline(__always)
    mutating func appendZeros(_ count: Int) {
        #if compiler(>=6.2)
        guard count > 0 else { return }
        append(addingCapacity: count) { room in
            room.withUnsafeMutableBufferPointer { room, written in
                room.baseAddress!.initialize(repeating: 0, count: count)
                written = count
            }
        }
        #else
        append(contentsOf: repeatElement(0, count: count))
        #endif
    }

    /// Appends `bytes` with one copy, growing the array as appending grows it (the generic
    /// `append(contentsOf:)` goes through a sequence's copy protocol, several times the cost for a line).
    /// Inlinable, so the batches copy a line in without a call into this module.
    @inlinable @inline(__always)
    package mutating func appendCopy(of bytes: UnsafeBufferPointer<UInt8>) {
        #if compiler(>=6.2)
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        append(addingCapacity: bytes.count) { room in
            room.withUnsafeMutableBufferPointer { room, written in
                room.baseAddress!.initialize(from: source, count: bytes.count)
                written = bytes.count
            }
        }
        #else
        append(contentsOf: bytes)
        #endif
    }

    /// Appends `value` in decimal: a `-` and up to 19 digits.
    package mutating func appendDecimal(_ value: Int64) {
        ByteWriter.writing(into: &self, bound: 20) { writer in LineProtocol.appendDecimal(value, into: &writer) }
    }
}

/// Room a name may take once escaped or repaired: at most 3 bytes per byte.
@inline(__always)
func nameBound(_ string: String) -> Int { string.utf8.count * 3 }
