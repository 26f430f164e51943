/// Why a line could not be parsed, and where: line and column count from 1, columns in bytes.
public struct LineParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The line, counting from 1.
    public var line: Int
    /// The byte within the line, counting from 1.
    public var column: Int
    /// What is wrong there.
    public var reason: String

    package init(line: Int, column: Int, reason: String) {
        self.line = line
        self.column = column
        self.reason = reason
    }

    public var description: String { "line \(line), column \(column): \(reason)" }
}

/// A strict parser for InfluxDB line protocol: every form the specification allows, nothing else.
///
/// ```swift
/// let points = try LineParser(precision: .ns).parse(Array("cpu,host=a usage=0.5 1700000000000000000\n".utf8))
/// points[0].field("usage")  // .float(0.5)
/// ```
///
/// Escapes are read as InfluxDB reads them: a backslash before a comma, space or `=` escapes it
/// everywhere, and before `"` in a measurement or field key too; any other backslash is literal.
/// It accepts all escapes, `#` comment lines, blank lines, CRLF line ends, an optional timestamp,
/// floats with exponents, `i` and `u` integers, and `t`/`T`/`true`/`True`/`TRUE` and the false forms.
/// It refuses NaN and infinity, empty names, line breaks in names and tag values, duplicate tag keys,
/// integers out of range and invalid UTF-8. Other control characters are read as written: InfluxDB and
/// VictoriaMetrics store them, and the encoder keeps them (see ``LineEncoder``); whoever prints a line
/// (influx-tail) shows them visibly. A field given twice is read as written (the encoder writes what a
/// point holds; the server decides).
/// ``validateLine(_:lineNumber:)`` accepts exactly the lines ``parseLine(_:lineNumber:)-([UInt8],_)`` accepts.
public struct LineParser: Sendable {
    /// The precision the timestamps are in.
    public var precision: Precision

    /// A parser for lines whose timestamps are in `precision`.
    ///
    /// - Parameter precision: The unit of the lines' timestamps (the write request's `precision`).
    public init(precision: Precision = .ns) {
        self.precision = precision
    }

    /// Parses every line of `bytes`, skipping blank and comment lines.
    ///
    /// - Parameter bytes: Line protocol, lines separated by `\n` (or `\r\n`).
    /// - Returns: The points, in the order of their lines.
    /// - Throws: ``LineParseError`` for the first line that is not valid line protocol.
    public func parse(_ bytes: [UInt8]) throws(LineParseError) -> [Point] {
        var points: [Point] = []
        var failure: LineParseError?
        bytes.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) {
                let result = Result { () throws(LineParseError) -> Point? in
                    try parseLine(UnsafeBufferPointer(rebasing: buffer[line.range]), lineNumber: line.number)
                }
                switch result {
                case .success(let point?): points.append(point)
                case .success(nil): break
                case .failure(let error):
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
        return points
    }

    /// Parses one line (without its line end).
    ///
    /// - Parameters:
    ///   - line: The line's bytes.
    ///   - lineNumber: The line number errors report.
    /// - Returns: The point, or `nil` for a blank or comment line.
    /// - Throws: ``LineParseError`` when the line is not valid line protocol.
    public func parseLine(_ line: [UInt8], lineNumber: Int = 1) throws(LineParseError) -> Point? {
        var result: Result<Point?, LineParseError> = .success(nil)
        line.withUnsafeBufferPointer { buffer in
            result = Result { () throws(LineParseError) -> Point? in try parseLine(buffer, lineNumber: lineNumber) }
        }
        return try result.get()
    }

    /// Parses one line (without its line end) in place.
    ///
    /// - Parameters:
    ///   - line: The line's bytes.
    ///   - lineNumber: The line number errors report.
    /// - Returns: The point, or `nil` for a blank or comment line.
    /// - Throws: ``LineParseError`` when the line is not valid line protocol.
    public func parseLine(_ line: UnsafeBufferPointer<UInt8>, lineNumber: Int = 1) throws(LineParseError) -> Point? {
        var spans = LineSpans(keepingFields: false)
        return try parseLine(line, lineNumber: lineNumber, collects: true, spans: &spans)
    }

    /// Checks one line as strictly as ``parseLine(_:lineNumber:)-(UnsafeBufferPointer<UInt8>,_)``
    /// without building the point.
    ///
    /// - Parameters:
    ///   - line: The line's bytes, without its line end.
    ///   - lineNumber: The line number errors report.
    /// - Returns: `true` for a valid point, `false` for a blank or comment line.
    /// - Throws: ``LineParseError`` when the line is not valid line protocol.
    public func validateLine(_ line: UnsafeBufferPointer<UInt8>, lineNumber: Int = 1) throws(LineParseError) -> Bool {
        var spans = LineSpans(keepingFields: false)
        return try parseLine(line, lineNumber: lineNumber, collects: false, spans: &spans) != nil
    }

    /// Checks one line as strictly as ``validateLine(_:lineNumber:)`` and says where its parts stand:
    /// the measurement, each tag's key and value, each field's key, value and kind, and the timestamp.
    /// Nothing is built or allocated once `spans` has room for the line's tags and fields: for a caller
    /// that reads the names where they are and copies the line on (the relay).
    ///
    /// - Parameters:
    ///   - line: The line's bytes, without its line end.
    ///   - lineNumber: The line number errors report.
    ///   - spans: Where the parts are written; the last line's are forgotten first.
    /// - Returns: `true` for a valid point, `false` for a blank or comment line.
    /// - Throws: ``LineParseError`` when the line is not valid line protocol.
    package func scanLine(
        _ line: UnsafeBufferPointer<UInt8>,
        lineNumber: Int = 1,
        into spans: inout LineSpans
    ) throws(LineParseError) -> Bool {
        spans.reset()
        return try parseLine(line, lineNumber: lineNumber, collects: false, spans: &spans) != nil
    }

    private func parseLine(
        _ line: UnsafeBufferPointer<UInt8>,
        lineNumber: Int,
        collects: Bool,
        spans: inout LineSpans
    ) throws(LineParseError) -> Point? {
        var cursor = Cursor(bytes: line, lineNumber: lineNumber, collects: collects)
        var end = line.count
        if end > 0 && line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        cursor.end = end
        if cursor.isAtEnd || line[0] == UInt8(ascii: "#") { return nil }
        if isBlank(line, end: end) { return nil }
        // One check of the whole line spares each name and string its own (nearly every line is ASCII).
        cursor.isASCII = isASCII(UnsafeBufferPointer(rebasing: line[..<end]))

        let measurement = try cursor.name(
            stoppingAt: .measurementStops,
            escapable: .measurementEscapes,
            what: "measurement"
        )
        spans.measurement = 0..<cursor.index
        var tags: [Point.Tag] = []
        // Keys are compared as written: unescaping maps distinct written keys to distinct keys.
        while cursor.peek == .comma {
            cursor.advance()
            let keyStart = cursor.index
            let key = try cursor.name(stoppingAt: .keyStops, escapable: .tagEscapes, what: "tag key")
            let keyRange = keyStart..<cursor.index
            guard cursor.peek == .equals else { throw cursor.error("expected '=' after tag key") }
            cursor.advance()
            let valueStart = cursor.index
            let value = try cursor.name(stoppingAt: .keyStops, escapable: .tagEscapes, what: "tag value")
            if cursor.peek == .equals { throw cursor.error("unescaped '=' in tag value") }
            if spans.tags.contains(where: { equalBytes(line, $0.key, keyRange) }) {
                throw cursor.error(
                    "duplicate tag key \"\(String(decoding: UnsafeBufferPointer(rebasing: line[keyRange]), as: UTF8.self))\""
                )
            }
            spans.tags.append(LineSpans.Tag(key: keyRange, value: valueStart..<cursor.index))
            if cursor.collects { tags.append(Point.Tag(key, value)) }
        }
        guard cursor.peek == .space else { throw cursor.error("expected a space before the field set") }
        cursor.advance()

        var fields: [Point.Field] = []
        var fieldCount = 0
        repeat {
            if fieldCount > 0 { cursor.advance() }
            let keyStart = cursor.index
            let key = try cursor.name(stoppingAt: .keyStops, escapable: .fieldKeyEscapes, what: "field key")
            let keyEnd = cursor.index
            guard cursor.peek == .equals else { throw cursor.error("expected '=' after field key") }
            cursor.advance()
            let valueStart = cursor.index
            let value = try cursor.fieldValue()
            fieldCount += 1
            if cursor.collects { fields.append(Point.Field(key, value)) }
            if spans.keepsFields {
                spans.fields.append(
                    LineSpans.Field(
                        key: keyStart..<keyEnd,
                        value: valueStart..<cursor.index,
                        kind: Self.kind(ofValue: line[valueStart], last: line[cursor.index - 1])
                    )
                )
            }
        } while cursor.peek == .comma

        var timestamp: Timestamp?
        if cursor.peek == .space {
            cursor.advance()
            if !cursor.isAtEnd && !cursor.restIsBlank {
                let value = try cursor.integer(what: "timestamp")
                timestamp = Timestamp(value, precision: precision)
                spans.timestamp = value
            }
        }
        if !cursor.restIsBlank { throw cursor.error("unexpected text after the line") }
        if spans.keepsFields {
            // Line breaks and carriage returns can only be in string values: names refuse them.
            spans.hasEscapesOrLineBreaks =
                firstIndex(in: UnsafeBufferPointer(rebasing: line[..<end]), from: 0) { word in
                    let low7 = word & repeatedLowBits
                    let plain =
                        differs(low7, from: .backslash) & differs(low7, from: UInt8(ascii: "\n"))
                        & differs(low7, from: UInt8(ascii: "\r"))
                    return matches(word, plain: plain)
                } < end
        }
        return Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp)
    }

    /// The kind of a field value the cursor has read, from its first and last bytes.
    @inline(__always)
    private static func kind(ofValue first: UInt8, last: UInt8) -> LineSpans.Kind {
        if first == .quote { return .string }
        if last == UInt8(ascii: "i") { return .int }
        if last == UInt8(ascii: "u") { return .uint }
        switch first {
        case UInt8(ascii: "t"), UInt8(ascii: "T"), UInt8(ascii: "f"), UInt8(ascii: "F"): return .bool
        default: return .float
        }
    }

    private func isBlank(_ line: UnsafeBufferPointer<UInt8>, end: Int) -> Bool {
        for index in 0..<end where line[index] != UInt8(ascii: " ") && line[index] != UInt8(ascii: "\t") {
            return false
        }
        return true
    }
}

/// Splits a buffer into lines at `\n`, except inside a quoted string field value.
package struct LineSplitter: Sequence, IteratorProtocol {
    /// One line: its 1-based number and its byte range, without the `\n`.
    package struct Line: Sendable {
        package var number: Int
        package var range: Range<Int>
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    private var number = 0

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    package mutating func next() -> Line? {
        guard position < bytes.count else { return nil }
        let start = position
        number += 1
        let startNumber = number
        // A quote opens a string only in the field set, after the first unescaped space, right after
        // an unescaped '=' (keys cannot hold '"' raw). Only newlines, backslashes, spaces and quotes
        // change that state, so the scan jumps from one of them to the next, eight bytes at a time.
        var inString = false
        var spaces = bytes[start] == UInt8(ascii: "#") ? -1 : 0
        var escapedByte = -1
        var index = start
        let count = bytes.count
        scanning: while index < count {
            if inString {
                index = firstIndex(in: bytes, from: index, where: Self.stringStops)
                guard index < count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\\"):
                    index += 2
                    continue
                case UInt8(ascii: "\""): inString = false
                default: number += 1  // a newline inside the string
                }
            } else {
                index = firstIndex(in: bytes, from: index, where: Self.stops)
                guard index < count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\n"):
                    break scanning
                case UInt8(ascii: "\\"):
                    // A backslash escapes the next byte, unless that is another backslash: then it is
                    // literal, and the second one is read in its turn.
                    if index + 1 < count && bytes[index + 1] == UInt8(ascii: "\\") {
                        index += 1
                    } else {
                        escapedByte = index + 1
                        index += 2
                    }
                    continue
                case UInt8(ascii: " "): spaces += 1
                default:
                    if spaces == 1 && index > start && bytes[index - 1] == UInt8(ascii: "=") && index - 1 != escapedByte
                    {
                        inString = true
                    }
                }
            }
            index += 1
        }
        let end = Swift.min(index, count)
        position = end + 1
        return Line(number: startNumber, range: start..<end)
    }

    /// Newlines, backslashes, spaces and quotes.
    @inline(__always)
    private static func stops(_ word: UInt64) -> UInt64 {
        let low7 = word & repeatedLowBits
        let plain =
            differs(low7, from: UInt8(ascii: "\n")) & differs(low7, from: UInt8(ascii: "\\"))
            & differs(low7, from: UInt8(ascii: " ")) & differs(low7, from: UInt8(ascii: "\""))
        return matches(word, plain: plain)
    }

    /// What ends or escapes inside a string value: backslashes and quotes (and newlines, counted).
    @inline(__always)
    private static func stringStops(_ word: UInt64) -> UInt64 {
        let low7 = word & repeatedLowBits
        let plain =
            differs(low7, from: UInt8(ascii: "\n")) & differs(low7, from: UInt8(ascii: "\\"))
            & differs(low7, from: UInt8(ascii: "\""))
        return matches(word, plain: plain)
    }
}

/// A set of ASCII bytes below 64, as a bit mask: the delimiters and escapable bytes of each position.
private struct ByteSet {
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
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let equals = UInt8(ascii: "=")
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
}

private struct Cursor {
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

private func isInteger(_ text: Substring, signed: Bool) -> Bool {
    var digits = text.utf8[...]
    if signed, digits.first == UInt8(ascii: "-") { digits = digits.dropFirst() }
    return !digits.isEmpty && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
}

/// `-?(digits(.digits?)?|.digits)([eE][-+]?digits)?`: the float forms line protocol accepts.
private func isFloat(_ text: String) -> Bool {
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
private func equalBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ first: Range<Int>, _ second: Range<Int>) -> Bool {
    guard first.count == second.count else { return false }
    for offset in 0..<first.count where bytes[first.lowerBound + offset] != bytes[second.lowerBound + offset] {
        return false
    }
    return true
}
