/// A set of ASCII bytes below 64, as a bit mask: the delimiters and escapable bytes of each position.
struct ByteSet {
    var bits: UInt64

    init(_ bytes: UInt8...) {
        bits = 0
        for byte in bytes { bits |= 1 << UInt64(byte) }
    }

    @inline(__always)
    func contains(_ byte: UInt8) -> Bool { byte < 64 && bits & (1 << UInt64(byte)) != 0 }

    static let measurementStops = ByteSet(.comma, .space)
    static let measurementEscapes = ByteSet(.comma, .space, .equals, .quote)
    static let keyStops = ByteSet(.equals, .comma, .space)
    static let tagEscapes = ByteSet(.comma, .equals, .space)
    static let fieldKeyEscapes = ByteSet(.comma, .equals, .space, .quote)
}

extension UInt8 {
    static let comma = UInt8(ascii: ",")
    static let space = UInt8(ascii: " ")
    static let equals = UInt8(ascii: "=")
    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")
}

/// The parser's position in one line, and the readers of each part of it (names, values, the timestamp):
/// ``LineParser`` reads every line through one.
struct LineCursor {
    let bytes: UnsafeBufferPointer<UInt8>
    let lineNumber: Int
    var index = 0
    var end: Int
    /// Whether names and values are built; `false` only checks the line.
    let collects: Bool
    /// Whether the whole line is ASCII, so that no name or string needs its UTF-8 checked.
    var isASCII = false

    init(bytes: UnsafeBufferPointer<UInt8>, lineNumber: Int, collects: Bool = true) {
        self.bytes = bytes
        self.lineNumber = lineNumber
        self.end = bytes.count
        self.collects = collects
    }

    var isAtEnd: Bool { index >= end }
    var peek: UInt8? { index < end ? bytes[index] : nil }
    mutating func advance() { index += 1 }

    var restIsBlank: Bool {
        var position = index
        while position < end {
            if bytes[position] != .space && bytes[position] != UInt8(ascii: "\t") { return false }
            position += 1
        }
        return true
    }

    func error(_ reason: String, at position: Int? = nil) -> LineParseError {
        LineParseError(line: lineNumber, column: (position ?? index) + 1, reason: reason)
    }

    /// Reads a measurement, key or tag value up to an unescaped stop byte, resolving escapes.
    mutating func name(stoppingAt stops: ByteSet, escapable: ByteSet, what: String) throws(LineParseError) -> String {
        let start = index
        if !collects {
            try skipName(stoppingAtEquals: stops.contains(.equals), escapable: escapable, what: what)
            return ""
        }
        // Most names hold no backslash: found in one scan and made at once from their bytes. Any other
        // (an escape, a line break, an empty name) is read, or refused, byte by byte below.
        var scan = index
        while scan < end {
            let byte = bytes[scan]
            if byte == .backslash || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || stops.contains(byte) {
                break
            }
            scan += 1
        }
        if scan > start, scan == end || stops.contains(bytes[scan]) {
            try checkUTF8(start..<scan, what: what)
            index = scan
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<scan]), as: UTF8.self)
        }
        var value: [UInt8] = []
        var length = 0
        while index < end {
            let byte = bytes[index]
            if byte == .backslash && index + 1 < end && escapable.contains(bytes[index + 1]) {
                if collects { value.append(bytes[index + 1]) }
                length += 1
                index += 2
                continue
            }
            if stops.contains(byte) { break }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                throw error("line break in \(what)")
            }
            if collects { value.append(byte) }
            length += 1
            index += 1
        }
        if length == 0 { throw error("empty \(what)", at: start) }
        if !collects {
            try checkUTF8(start..<index, what: what)
            return ""
        }
        return try string(value, startingAt: start, what: what)
    }

    /// Checks a name without building it, jumping from one backslash or stop byte to the next eight
    /// bytes at a time. The stops are a comma and a space, and `=` when `stoppingAtEquals`.
    mutating func skipName(stoppingAtEquals: Bool, escapable: ByteSet, what: String) throws(LineParseError) {
        let start = index
        let line = UnsafeBufferPointer(rebasing: bytes[..<end])
        while true {
            index = firstIndex(in: line, from: index) { word in
                let low7 = word & repeatedLowBits
                var plain =
                    differs(low7, from: .backslash) & differs(low7, from: .comma) & differs(low7, from: .space)
                    & differs(low7, from: UInt8(ascii: "\n")) & differs(low7, from: UInt8(ascii: "\r"))
                if stoppingAtEquals { plain &= differs(low7, from: .equals) }
                return matches(word, plain: plain)
            }
            guard index < end else { break }
            let byte = bytes[index]
            if byte == .backslash {
                // An escape pair, or a backslash read as itself.
                index += index + 1 < end && escapable.contains(bytes[index + 1]) ? 2 : 1
                continue
            }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { throw error("line break in \(what)") }
            break
        }
        if index == start { throw error("empty \(what)", at: start) }
        try checkUTF8(start..<index, what: what)
    }

    /// Whether `token` is certainly a valid number or boolean, checked on bytes; `false` sends it to
    /// the full check (which also produces the error message).
    func checkNumberOrBool(_ token: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let last = token.last else { return false }
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        if last == UInt8(ascii: "i") || last == UInt8(ascii: "u") {
            var index = 0
            var negative = false
            if token[0] == UInt8(ascii: "-") {
                if last == UInt8(ascii: "u") { return false }
                negative = true
                index = 1
            }
            let digits = token.count - 1 - index
            guard digits > 0 && digits <= 19 else { return false }
            var value: UInt64 = 0
            for position in index..<(token.count - 1) {
                let byte = token[position]
                guard isDigit(byte) else { return false }
                value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
            }
            if last == UInt8(ascii: "u") { return true }
            return negative ? value <= UInt64(Int64.max) + 1 : value <= UInt64(Int64.max)
        }
        switch token.count {
        case 1:
            if token[0] == UInt8(ascii: "t") || token[0] == UInt8(ascii: "T") || token[0] == UInt8(ascii: "f")
                || token[0] == UInt8(ascii: "F")
            {
                return true
            }
        case 4, 5:
            // The boolean words, as the full check reads them.
            for word in Self.booleanWords where word.count == token.count {
                if word.withUnsafeBufferPointer({ $0.elementsEqual(token) }) { return true }
            }
        default: break
        }
        // Plain decimals without an exponent, at most 300 digits: always a finite float.
        var index = token[0] == UInt8(ascii: "-") ? 1 : 0
        var digits = 0
        var dot = false
        while index < token.count {
            let byte = token[index]
            if isDigit(byte) {
                digits += 1
            } else if byte == UInt8(ascii: ".") && !dot {
                dot = true
            } else {
                return false
            }
            index += 1
        }
        return digits > 0 && digits <= 300
    }

    /// The boolean words beside `t`, `T`, `f` and `F`.
    static let booleanWords: [[UInt8]] = ["true", "True", "TRUE", "false", "False", "FALSE"].map { Array($0.utf8) }

    func checkUTF8(_ range: Range<Int>, what: String) throws(LineParseError) {
        if isASCII || LineProtocol.isASCII(UnsafeBufferPointer(rebasing: bytes[range])) { return }
        var iterator = UnsafeBufferPointer(rebasing: bytes[range]).makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return
            case .error: throw error("invalid UTF-8 in \(what)", at: range.lowerBound)
            }
        }
    }

    func string(_ value: [UInt8], startingAt start: Int, what: String) throws(LineParseError) -> String {
        let text = String(decoding: value, as: UTF8.self)
        guard text.utf8.elementsEqual(value) else { throw error("invalid UTF-8 in \(what)", at: start) }
        return text
    }

    /// `-?[0-9]{1,19}` within `Int64`, read from its bytes; `nil` for any other token, which the full
    /// reading takes (and refuses or reads, as `Int64(_:)` does).
    static func decimal(_ token: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard let first = token.first else { return nil }
        let negative = first == UInt8(ascii: "-")
        let start = negative ? 1 : 0
        guard token.count > start, token.count - start <= 19 else { return nil }
        var value: UInt64 = 0
        for position in start..<token.count {
            let digit = token[position] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value &* 10 &+ UInt64(digit)
        }
        if negative { return value <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- value) : nil }
        return value <= UInt64(Int64.max) ? Int64(value) : nil
    }

    mutating func fieldValue() throws(LineParseError) -> FieldValue {
        let start = index
        if peek == .quote {
            index += 1
            var value: [UInt8] = []
            while index < end {
                let byte = bytes[index]
                if byte == .backslash && index + 1 < end
                    && (bytes[index + 1] == .quote || bytes[index + 1] == .backslash)
                {
                    if collects { value.append(bytes[index + 1]) }
                    index += 2
                    continue
                }
                if byte == .quote {
                    index += 1
                    if !collects {
                        try checkUTF8(start + 1..<index - 1, what: "string value")
                        return .bool(true)
                    }
                    return .string(try string(value, startingAt: start, what: "string value"))
                }
                if collects { value.append(byte) }
                index += 1
            }
            throw error("unterminated string value", at: start)
        }
        var tokenEnd = index
        while tokenEnd < end && bytes[tokenEnd] != .comma && bytes[tokenEnd] != .space { tokenEnd += 1 }
        if !collects, checkNumberOrBool(UnsafeBufferPointer(rebasing: bytes[index..<tokenEnd])) {
            index = tokenEnd
            return .bool(true)
        }
        if let number = Self.shortInteger(UnsafeBufferPointer(rebasing: bytes[index..<tokenEnd])) {
            index = tokenEnd
            return .int(number)
        }
        let token = String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<tokenEnd]), as: UTF8.self)
        if token.isEmpty { throw error("empty field value") }
        let value: FieldValue
        switch token {
        case "t", "T", "true", "True", "TRUE": value = .bool(true)
        case "f", "F", "false", "False", "FALSE": value = .bool(false)
        default:
            if token.hasSuffix("i") {
                let digits = token.dropLast()
                guard isInteger(digits, signed: true), let number = Int64(digits) else {
                    throw error("invalid integer \(token)")
                }
                value = .int(number)
            } else if token.hasSuffix("u") {
                let digits = token.dropLast()
                guard isInteger(digits, signed: false), let number = UInt64(digits) else {
                    throw error("invalid unsigned integer \(token)")
                }
                value = .uint(number)
            } else {
                guard isFloat(token), let number = Double(token), number.isFinite else {
                    throw error("invalid field value \(token)")
                }
                value = .float(number)
            }
        }
        index = tokenEnd
        return value
    }

    /// The value of an `i` integer of at most 18 digits (which cannot overflow), read from its bytes;
    /// `nil` for any other token, which the full reading takes.
    static func shortInteger(_ token: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard token.count >= 2, token[token.count - 1] == UInt8(ascii: "i") else { return nil }
        let negative = token[0] == UInt8(ascii: "-")
        let digits = UnsafeBufferPointer(rebasing: token[(negative ? 1 : 0)..<(token.count - 1)])
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return negative ? -value : value
    }

    mutating func integer(what: String) throws(LineParseError) -> Int64 {
        var tokenEnd = index
        while tokenEnd < end && bytes[tokenEnd] != .space && bytes[tokenEnd] != UInt8(ascii: "\t") { tokenEnd += 1 }
        if let value = Self.decimal(UnsafeBufferPointer(rebasing: bytes[index..<tokenEnd])) {
            index = tokenEnd
            return value
        }
        let token = String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<tokenEnd]), as: UTF8.self)
        guard isInteger(Substring(token), signed: true), let value = Int64(token) else {
            throw error("invalid \(what) \(token)")
        }
        index = tokenEnd
        return value
    }
}

func isInteger(_ text: Substring, signed: Bool) -> Bool {
    var digits = text.utf8[...]
    if signed, digits.first == UInt8(ascii: "-") { digits = digits.dropFirst() }
    return !digits.isEmpty && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
}

/// `-?(digits(.digits?)?|.digits)([eE][-+]?digits)?`: the float forms line protocol accepts.
func isFloat(_ text: String) -> Bool {
    var bytes = text.utf8[...]
    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    if bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
    let integerDigits = bytes.prefix(while: isDigit).count
    bytes = bytes.dropFirst(integerDigits)
    var fractionDigits = 0
    if bytes.first == UInt8(ascii: ".") {
        bytes = bytes.dropFirst()
        fractionDigits = bytes.prefix(while: isDigit).count
        bytes = bytes.dropFirst(fractionDigits)
    }
    if integerDigits + fractionDigits == 0 { return false }
    if let first = bytes.first, first == UInt8(ascii: "e") || first == UInt8(ascii: "E") {
        bytes = bytes.dropFirst()
        if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let exponentDigits = bytes.prefix(while: isDigit).count
        if exponentDigits == 0 { return false }
        bytes = bytes.dropFirst(exponentDigits)
    }
    return bytes.isEmpty
}

/// Whether two ranges of `bytes` hold the same bytes.
@inline(__always)
func equalBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ first: Range<Int>, _ second: Range<Int>) -> Bool {
    guard first.count == second.count else { return false }
    for offset in 0..<first.count where bytes[first.lowerBound + offset] != bytes[second.lowerBound + offset] {
        return false
    }
    return true
}
