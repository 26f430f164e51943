import LineProtocol

/// What a URL's series depends on, written as bytes: its text with every path segment made of digits
/// alone written as one `0` byte, and its query left out (``RequestSample`` records neither). URLs
/// with one shape differ only in numeric ids and queries: each such segment is `{id}` at its position
/// whatever its digits, so they have one templated path, hence one series.
///
/// ```swift
/// URLShape.withShape(of: "https://api.example.com/users/8271?page=2") { shape in
///     // shape's bytes: "https://api.example.com/users/\0"
/// }
/// ```
///
/// The scheme and the authority (up to the third `/`) and a fragment are kept as they are. A URL with
/// neither a numeric segment nor a query has no shape apart from its text (`nil`).
enum URLShape {
    /// The longest URL given a shape (a stack buffer of this many bytes is written).
    static let maximumBytes = 512
    /// Written in place of a segment of digits (never a byte of a URL's text).
    static let numericSegment: UInt8 = 0

    /// `body` given the shape of `url`, or `nil` when it has none apart from its text or is longer than
    /// ``maximumBytes``.
    @inline(__always)
    static func withShape<Result>(of url: String, _ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result {
        withUTF8Bytes(url) { text in
            guard text.count <= maximumBytes else { return body(nil) }
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumBytes) { buffer in
                guard let count = write(text, into: buffer) else { return body(nil) }
                return body(UnsafeBufferPointer(rebasing: buffer[..<count]))
            }
        }
    }

    /// The shape of `url` as a string (what a cache keeps), `nil` when it has none apart from its text.
    static func string(of url: String) -> String? {
        withShape(of: url) { shape in shape.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Writes the shape of `text` into `out` (at least as long), and returns its length; `nil` when
    /// nothing was left out. (Read and written through pointers: the lengths are checked above.)
    private static func write(_ text: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        guard let input = text.baseAddress, let output = out.baseAddress, out.count >= text.count else { return nil }
        let count = text.count
        var index = 0
        var written = 0
        var slashes = 0
        // The scheme and the authority, up to and with the path's first `/`.
        while index < count, slashes < 3 {
            let byte = input[index]
            if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "/") { slashes += 1 }
            output[written] = byte
            written += 1
            index += 1
        }
        var shortened = false
        if slashes == 3 {
            // The path: each segment copied, then written as one byte if it had digits alone.
            var segmentStart = written
            var digitsOnly = true
            while index < count {
                let byte = input[index]
                if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
                    if digitsOnly, written > segmentStart {
                        output[segmentStart] = numericSegment
                        written = segmentStart + 1
                        shortened = true
                    }
                    if byte != UInt8(ascii: "/") { break }
                    output[written] = byte
                    written += 1
                    index += 1
                    segmentStart = written
                    digitsOnly = true
                    continue
                }
                if byte &- UInt8(ascii: "0") >= 10 { digitsOnly = false }
                output[written] = byte
                written += 1
                index += 1
            }
            if index == count, digitsOnly, written > segmentStart {
                output[segmentStart] = numericSegment
                written = segmentStart + 1
                shortened = true
            }
        }
        // The query, left out; the fragment kept.
        if index < count, input[index] == UInt8(ascii: "?") {
            shortened = true
            while index < count, input[index] != UInt8(ascii: "#") { index += 1 }
        }
        guard shortened else { return nil }
        (output + written).initialize(from: input + index, count: count - index)
        return written + count - index
    }
}
