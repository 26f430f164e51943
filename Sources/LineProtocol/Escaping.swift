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
