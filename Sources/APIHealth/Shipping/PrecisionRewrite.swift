import LineProtocol

/// Lines encoded at the agent's precision, rewritten for a destination that keeps a coarser one: each
/// line's timestamp (its last token: a line's last space always comes before it, since a timestamp
/// holds none) divided by the ratio and rounded down. Points of one series that fall into one unit of
/// the coarser precision then share a timestamp there, and the store keeps the last of them.
enum PrecisionRewrite {
    /// `lines` at `target` precision; `target` is no finer than `source`.
    static func rewrite(_ lines: [UInt8], from source: Precision, to target: Precision) -> [UInt8] {
        let ratio = target.nanosecondsPerUnit / source.nanosecondsPerUnit
        guard ratio > 1 else { return lines }
        var output: [UInt8] = []
        output.reserveCapacity(lines.count)
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) where !line.range.isEmpty {
                let bytes = buffer[line.range]
                guard let space = bytes.lastIndex(of: UInt8(ascii: " ")),
                    let value = Int64(String(decoding: bytes[(space + 1)...], as: UTF8.self))
                else {
                    output += bytes
                    output.append(UInt8(ascii: "\n"))
                    continue
                }
                // Rounded down, negative instants too (before 1970).
                var scaled = value / ratio
                if value % ratio < 0 { scaled -= 1 }
                output += bytes[...space]
                output += Array(String(scaled).utf8)
                output.append(UInt8(ascii: "\n"))
            }
        }
        return output
    }
}
