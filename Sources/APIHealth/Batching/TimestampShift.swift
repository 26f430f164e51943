import LineProtocol

/// Lines stamped on the device's own clock before its offset was known, and how far to move them: the
/// first `bytes` of a batch's lines, each line's timestamp moved by `units` of the agent's precision when
/// its body is made (``BatchContents/lines()``, `BatchWorker`), never under the batching lock.
///
/// ```swift
/// let shift = TimestampShift(bytes: batch.bytes.count, nanoseconds: -7_200_000_000_000, precision: .ms)
/// shift.apply(to: Array("m v=1i 1700007200000\n".utf8))  // "m v=1i 1700000000000\n"
/// ```
struct TimestampShift: Equatable {
    /// How many bytes of the lines, from their start, were stamped on the device's clock.
    var bytes: Int
    /// How far to move their timestamps, in units of the precision they were written in.
    var units: Int64

    /// A shift of `nanoseconds` (the clock's offset: true time minus the device's) for lines written at
    /// `precision`, rounded down to its unit.
    init(bytes: Int, nanoseconds: Int64, precision: Precision) {
        self.bytes = bytes
        let unit = precision.nanosecondsPerUnit
        var units = nanoseconds / unit
        if nanoseconds % unit < 0 { units -= 1 }
        self.units = units
    }

    init(bytes: Int, units: Int64) {
        self.bytes = bytes
        self.units = units
    }

    /// `lines` with the timestamp of each line that starts within the first ``bytes`` moved by ``units``.
    /// A line's timestamp is its last token (a timestamp holds no space, and a field set never ends in a
    /// bare number after a space: strings end in a quote); a line without one, or whose timestamp would
    /// pass the range of `Int64`, is left as it is.
    func apply(to lines: [UInt8]) -> [UInt8] {
        guard units != 0, bytes > 0, !lines.isEmpty else { return lines }
        var output: [UInt8] = []
        output.reserveCapacity(lines.count + 16)
        var copied = 0
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) {
                guard line.range.lowerBound < bytes else { break }
                output += buffer[copied..<line.range.lowerBound]
                let lineEnd = min(line.range.upperBound + 1, buffer.count)
                if let moved = Self.moved(buffer[line.range], by: units) {
                    output += moved
                    output += buffer[line.range.upperBound..<lineEnd]
                } else {
                    output += buffer[line.range.lowerBound..<lineEnd]
                }
                copied = lineEnd
            }
            output += buffer[copied...]
        }
        return output
    }

    /// `line` with its timestamp moved by `units`; `nil` when it has none or the sum overflows.
    private static func moved(_ line: Slice<UnsafeBufferPointer<UInt8>>, by units: Int64) -> [UInt8]? {
        guard let space = line.lastIndex(of: UInt8(ascii: " ")), space + 1 < line.endIndex,
            space > line.startIndex, line[space - 1] != UInt8(ascii: "\\")
        else { return nil }
        let digits = line[(space + 1)...]
        let negative = digits.first == UInt8(ascii: "-")
        let magnitude = negative ? digits.dropFirst() : digits[...]
        guard !magnitude.isEmpty, magnitude.count <= 19,
            magnitude.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let value = Int64(String(decoding: digits, as: UTF8.self))
        else { return nil }
        let (sum, overflowed) = value.addingReportingOverflow(units)
        guard !overflowed else { return nil }
        return Array(line[...space]) + Array(String(sum).utf8)
    }
}
