import CZlib

/// Gzip (RFC 1952) compression with the system zlib, as the write API's `Content-Encoding: gzip` expects.
///
/// ```swift
/// let body = try Gzip.compress(lines, level: 1)
/// request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
/// ```
public enum Gzip {
    /// What zlib reported when it could not do its work.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public var code: Int32
        public var operation: String
        public var description: String { "zlib \(operation) failed with code \(code)" }
    }

    /// The zlib levels: 0 (store) to 9 (smallest). 1 is fastest, 6 is zlib's default.
    public static let levels: ClosedRange<Int> = 0...9

    /// One complete gzip member holding `input`, at `level` (clamped to ``levels``).
    public static func compress(_ input: [UInt8], level: Int = 6) throws(Failure) -> [UInt8] {
        var output: [UInt8] = []
        try compress(input, level: level, into: &output)
        return output
    }

    /// Appends one complete gzip member holding `input` to `output`.
    public static func compress(_ input: [UInt8], level: Int, into output: inout [UInt8]) throws(Failure) {
        var stream = z_stream()
        let clamped = Int32(min(max(level, levels.lowerBound), levels.upperBound))
        // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of a zlib wrapper.
        var status = deflateInit2_(
            &stream, clamped, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
            Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw Failure(code: status, operation: "deflateInit2") }
        defer { deflateEnd(&stream) }

        let bound = Int(deflateBound(&stream, UInt(input.count))) + 32
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: bound))
        status = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { destination in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = destination.baseAddress! + start
                stream.avail_out = UInt32(bound)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else {
            output.removeSubrange(start...)
            throw Failure(code: status, operation: "deflate")
        }
        output.removeSubrange((start + Int(stream.total_out))...)
    }

    /// The concatenated contents of every gzip member in `input`.
    public static func decompress(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        var status = inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw Failure(code: status, operation: "inflateInit2") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var consumed = 0
        while consumed < input.count {
            status = input.withUnsafeBufferPointer { source in
                chunk.withUnsafeMutableBufferPointer { destination in
                    stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress! + consumed)
                    stream.avail_in = UInt32(source.count - consumed)
                    stream.next_out = destination.baseAddress
                    stream.avail_out = UInt32(destination.count)
                    let result = inflate(&stream, Z_NO_FLUSH)
                    consumed = source.count - Int(stream.avail_in)
                    return result
                }
            }
            output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
            if status == Z_STREAM_END {
                if consumed < input.count { inflateReset(&stream) } else { break }
            } else if status != Z_OK {
                throw Failure(code: status, operation: "inflate")
            }
        }
        guard status == Z_STREAM_END else { throw Failure(code: status, operation: "inflate (truncated input)") }
        return output
    }
}
