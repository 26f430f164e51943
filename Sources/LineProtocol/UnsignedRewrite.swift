/// Lines with every unsigned field rewritten as a signed one, and what that changed.
///
/// Lines kept for one destination (the v2 API, or none yet) carry the `u` suffix, which InfluxDB 1.x
/// refuses. Before they go to a v1 destination, ``LineEncoder/rewritingUnsignedAsSigned(_:)`` turns
/// `42u` into `42i`, exactly as an encoder with ``LineEncoder/writesUnsignedAsSigned`` would have
/// written it.
///
/// ```swift
/// let rewrite = LineEncoder.rewritingUnsignedAsSigned(batch)
/// send(rewrite.lines)
/// pointsRepaired += rewrite.clampedLines
/// ```
package struct UnsignedRewrite: Sendable, Hashable {
    /// The lines, with each `Nu` field value written as `Ni` (values over `Int64.max` as `Int64.max`).
    package var lines: [UInt8]
    /// Unsigned field values rewritten.
    package var rewrittenFields = 0
    /// Of those, values over `Int64.max` written as `Int64.max`: changed values.
    package var clampedFields = 0
    /// Lines with at least one clamped value: each is a repaired point.
    package var clampedLines = 0

    /// A rewrite result for `lines`, before any change is counted.
    package init(lines: [UInt8]) {
        self.lines = lines
    }
}

extension LineEncoder {
    /// Rewrites every unsigned integer field (`42u`) in `lines` as a signed one (`42i`), clamping
    /// values over `Int64.max` to it and counting them, so that lines written for the v2 API can be
    /// sent to InfluxDB 1.x, which has no `u` type.
    ///
    /// Everything else is copied byte for byte: names, strings (a `u` inside a quoted string or an
    /// escaped name is never touched, and a string may span lines), timestamps and line endings. A line
    /// that does not follow line protocol is copied as it is.
    ///
    /// - Parameter lines: Whole lines of line protocol, each ending in `\n` (the last may lack it).
    /// - Returns: The rewritten lines and how many values were rewritten and clamped.
    package static func rewritingUnsignedAsSigned(_ lines: [UInt8]) -> UnsignedRewrite {
        var result = UnsignedRewrite(lines: [])
        result.lines.reserveCapacity(lines.count)
        var start = 0
        while start < lines.count {
            start = rewriteLine(lines, from: start, into: &result)
        }
        return result
    }

    /// Copies the line starting at `start` into `result`, rewriting its unsigned fields. Returns where
    /// the next line starts.
    private static func rewriteLine(_ bytes: [UInt8], from start: Int, into result: inout UnsignedRewrite) -> Int {
        let space = UInt8(ascii: " ")
        let newline = UInt8(ascii: "\n")
        let backslash = UInt8(ascii: "\\")
        var index = start
        var copied = start
        var clamped = false
        // Measurement and tags: up to the first unescaped space.
        while index < bytes.count, bytes[index] != space, bytes[index] != newline {
            index += bytes[index] == backslash ? 2 : 1
        }
        if index < bytes.count, bytes[index] == space {
            index += 1
            // Fields: key=value pairs separated by commas, up to an unescaped space or the line's end.
            fields: while index < bytes.count {
                while index < bytes.count, bytes[index] != UInt8(ascii: "="), bytes[index] != newline {
                    index += bytes[index] == backslash ? 2 : 1
                }
                guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else { break }
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                        index += bytes[index] == backslash ? 2 : 1
                    }
                    index += 1
                } else {
                    let valueStart = index
                    while index < bytes.count, bytes[index] != UInt8(ascii: ","), bytes[index] != space,
                        bytes[index] != newline
                    {
                        index += 1
                    }
                    if let value = unsignedValue(bytes, valueStart..<index) {
                        result.lines.append(contentsOf: bytes[copied..<valueStart])
                        appendSigned(value, into: &result.lines)
                        copied = index
                        result.rewrittenFields += 1
                        if value > UInt64(Int64.max) {
                            result.clampedFields += 1
                            clamped = true
                        }
                    }
                }
                guard index < bytes.count, bytes[index] == UInt8(ascii: ",") else { break fields }
                index += 1
            }
        }
        // The timestamp, if any, and the line ending.
        while index < bytes.count, bytes[index] != newline { index += 1 }
        let end = min(index + 1, bytes.count)
        result.lines.append(contentsOf: bytes[copied..<end])
        if clamped { result.clampedLines += 1 }
        return end
    }

    /// The value of an unsigned field (`digits` then `u`), or `nil`; past `UInt64.max`, `UInt64.max`.
    private static func unsignedValue(_ bytes: [UInt8], _ range: Range<Int>) -> UInt64? {
        guard range.count >= 2, bytes[range.upperBound - 1] == UInt8(ascii: "u") else { return nil }
        var value: UInt64 = 0
        for index in range.lowerBound..<(range.upperBound - 1) {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(digit))
            value = overflow || overflow2 ? .max : sum
        }
        return value
    }

    private static func appendSigned(_ value: UInt64, into lines: inout [UInt8]) {
        lines.append(contentsOf: String(min(value, UInt64(Int64.max))).utf8)
        lines.append(UInt8(ascii: "i"))
    }
}
