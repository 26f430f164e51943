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

    /// The value of `field`, one of the fields ``scanLine(_:lineNumber:into:)`` found in `line`, read as
    /// ``parseLine(_:lineNumber:)-(UnsafeBufferPointer<UInt8>,_)`` reads it (a string unescaped).
    ///
    /// - Parameters:
    ///   - field: A field of the spans `line` was scanned into.
    ///   - line: The line those spans were scanned from.
    /// - Returns: The value, `nil` if the range does not hold one (spans of another line).
    package func fieldValue(_ field: LineSpans.Field, in line: UnsafeBufferPointer<UInt8>) -> FieldValue? {
        guard field.value.upperBound <= line.count else { return nil }
        var cursor = LineCursor(bytes: UnsafeBufferPointer(rebasing: line[..<field.value.upperBound]), lineNumber: 1)
        cursor.index = field.value.lowerBound
        return try? cursor.fieldValue()
    }

    private func parseLine(
        _ line: UnsafeBufferPointer<UInt8>,
        lineNumber: Int,
        collects: Bool,
        spans: inout LineSpans
    ) throws(LineParseError) -> Point? {
        var cursor = LineCursor(bytes: line, lineNumber: lineNumber, collects: collects)
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
