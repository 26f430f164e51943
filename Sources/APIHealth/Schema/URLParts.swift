import Foundation

/// The scheme, host, port and path of a request's URL, as `URL.scheme`, `URL.host`, `URL.port` and
/// `URL.path` give them,
/// read straight from the URL's text when it is a plain one (ASCII, no user, no IPv6 literal, no
/// percent escape, no `;`), else from `URL`: a request to a URL not seen before is rendered without
/// Foundation parsing and decoding it again.
///
/// ```swift
/// let parts = URLParts(url, text: url.absoluteString)
/// parts.host   // "api.example.com" for https://api.example.com:8443/users/1?page=2
/// ```
struct URLParts: Equatable {
    var scheme: String?
    var host: String?
    var port: Int?
    var path: String

    /// The parts of `url`, whose absolute string is `text`; without `readingPath`, `path` is left empty.
    init(_ url: URL, text: String, readingPath: Bool = true) {
        if let plain = Self(plain: text, readingPath: readingPath) {
            self = plain
        } else {
            self.init(scheme: url.scheme, host: url.host, port: url.port, path: readingPath ? url.path : "")
        }
    }

    /// These parts with the scheme and the host lowercased, as the schema compares and writes them.
    func lowercased() -> URLParts {
        URLParts(scheme: scheme?.lowercasedIfNeeded(), host: host?.lowercasedIfNeeded(), port: port, path: path)
    }

    init(scheme: String?, host: String?, port: Int?, path: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
    }

    /// The parts of `text` when it is a plain absolute URL (`scheme://host[:port][/path][?…][#…]`).
    init?(plain text: String, readingPath: Bool = true) {
        // A URL's absolute string is native UTF-8: read in place (a bridged one is left to `URL`).
        guard
            let parts = text.utf8.withContiguousStorageIfAvailable({ bytes -> URLParts? in
                guard let (scheme, host, port, path) = Self.split(bytes) else { return nil }
                return URLParts(
                    scheme: String(decoding: UnsafeBufferPointer(rebasing: bytes[scheme]), as: UTF8.self),
                    host: String(decoding: UnsafeBufferPointer(rebasing: bytes[host]), as: UTF8.self),
                    port: port,
                    path: readingPath ? String(decoding: UnsafeBufferPointer(rebasing: bytes[path]), as: UTF8.self) : ""
                )
            }) ?? nil
        else { return nil }
        self = parts
    }

    /// The byte ranges of the scheme, the host and the path in `bytes`, and the port; `nil` unless plain.
    static func split(_ bytes: UnsafeBufferPointer<UInt8>) -> (Range<Int>, Range<Int>, Int?, Range<Int>)? {
        let count = bytes.count
        var index = 0
        // The scheme: a letter, then letters, digits, `+`, `-`, `.`; then `://`.
        while index < count, isSchemeByte(bytes[index], first: index == 0) { index += 1 }
        guard index > 0, index + 3 <= count, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
            bytes[index + 2] == UInt8(ascii: "/")
        else { return nil }
        let schemeEnd = index
        index += 3
        let hostStart = index
        var colon: Int?
        // Most bytes are none of the few the loops look for: one test of a bit tells (the split is on the
        // path of every request to a URL not seen before).
        while index < count {
            let byte = bytes[index]
            if isAmong(byte, below64: hostStopsBelow64, from64: hostStopsFrom64) {
                if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
                // A user, an IPv6 literal, an escape or anything not ASCII: Foundation's reading.
                guard byte == UInt8(ascii: ":"), colon == nil else { return nil }
                colon = index
            }
            index += 1
        }
        let authorityEnd = index
        let hostEnd = colon ?? authorityEnd
        guard hostEnd > hostStart else { return nil }
        var port: Int?
        if let colon {
            // An empty port, or one that is not a number that fits: Foundation's reading.
            guard authorityEnd - colon - 1 >= 1, authorityEnd - colon - 1 <= 5 else { return nil }
            var value = 0
            for position in (colon + 1)..<authorityEnd {
                let byte = bytes[position]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            port = value
        }
        let pathStart = index
        while index < count {
            let byte = bytes[index]
            if isAmong(byte, below64: pathStopsBelow64, from64: 0) {
                if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
                // An escape, a parameter or anything not ASCII: Foundation's reading.
                return nil
            }
            index += 1
        }
        var pathEnd = index
        // `URL.path` drops its trailing slashes (not the root's).
        while pathEnd - pathStart > 1, bytes[pathEnd - 1] == UInt8(ascii: "/") { pathEnd -= 1 }
        return (0..<schemeEnd, hostStart..<hostEnd, port, pathStart..<pathEnd)
    }

    /// Whether `byte` is one of a set of bytes, given as one bit each below 64 and from 64 to 127, or
    /// is not ASCII.
    @inline(__always)
    private static func isAmong(_ byte: UInt8, below64: UInt64, from64: UInt64) -> Bool {
        byte < 64 ? below64 >> byte & 1 == 1 : byte >= 128 || from64 >> (byte & 63) & 1 == 1
    }

    /// The bytes the host stops at: `/?#:` (the end of the authority, a port) and `@[%` (left to Foundation).
    private static var hostStopsBelow64: UInt64 { 0x8400_8028_0000_0000 }
    private static var hostStopsFrom64: UInt64 { 0x0800_0001 }
    /// The bytes the path stops at: `?#` (its end) and `%;` (left to Foundation).
    private static var pathStopsBelow64: UInt64 { 0x8800_0028_0000_0000 }

    private static func isSchemeByte(_ byte: UInt8, first: Bool) -> Bool {
        let letter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
        if first { return letter }
        return letter || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }
}

extension Substring {
    /// The non-empty segments between `/`s, found by reading bytes rather than characters: what
    /// `split(separator: "/", omittingEmptySubsequences: true)` gives, except after a `/` followed by a
    /// combining mark (one character to `split`, which then does not split there; a path's `/` always
    /// separates).
    func pathSegments() -> [Substring] { PathSegments(self).map(\.text) }
}

/// One segment of a path, with what its bytes told while it was found.
struct PathSegment {
    let text: Substring
    /// What `PathTemplater.placeholder(for:)` gives when the bytes alone tell (`.some("{id}")` for a
    /// number, `.some(nil)` for a short word kept); `nil` when the segment's whole shape decides.
    let quickPlaceholder: String??
    /// Whether it has an ASCII capital or anything beyond ASCII (`lowercased()` may change it).
    let needsLowering: Bool

    /// `text`, lowercased.
    var lowercased: String { needsLowering ? text.lowercased() : String(text) }

    /// `PathTemplater.placeholder(for:)` of `text`.
    var placeholder: String? { quickPlaceholder ?? PathTemplater.placeholderByShape(for: text) }
}

/// The non-empty segments of a path between `/`s, read one at a time as `Substring.pathSegments()` gives
/// them all (no array made); the bytes are read in place when the path's are contiguous.
struct PathSegments: Sequence, IteratorProtocol {
    private let path: Substring
    /// Bytes from the path's start to where the next segment is looked for.
    private var offset = 0

    init(_ path: Substring) {
        self.path = path
    }

    mutating func next() -> PathSegment? {
        let offset = self.offset
        let found =
            path.utf8.withContiguousStorageIfAvailable { bytes in Self.segment(in: bytes, from: offset) }
            ?? Self.segment(in: path.utf8, from: offset)
        guard let found else {
            self.offset = path.utf8.count
            return nil
        }
        self.offset = found.bytes.upperBound
        let utf8 = path.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: found.bytes.lowerBound)
        return PathSegment(
            text: Substring(utf8[start..<utf8.index(start, offsetBy: found.bytes.count)]),
            quickPlaceholder: found.quickPlaceholder,
            needsLowering: found.needsLowering
        )
    }

    /// The byte offsets of the first segment at or after `offset` and what its bytes tell, `nil` when
    /// none is left.
    private static func segment<Bytes: Collection<UInt8>>(
        in bytes: Bytes,
        from offset: Int
    ) -> (bytes: Range<Int>, quickPlaceholder: String??, needsLowering: Bool)? {
        var index = bytes.index(bytes.startIndex, offsetBy: offset)
        var position = offset
        while index != bytes.endIndex, bytes[index] == UInt8(ascii: "/") {
            bytes.formIndex(after: &index)
            position += 1
        }
        guard index != bytes.endIndex else { return nil }
        let start = position
        var words = PathTemplater.WordOrNumber()
        var needsLowering = false
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") { break }
            words.add(byte)
            if byte >= 0x80 || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) { needsLowering = true }
            bytes.formIndex(after: &index)
            position += 1
        }
        return (start..<position, words.reading, needsLowering)
    }
}

extension String {
    /// The non-empty segments between `/`s (see ``Substring/pathSegments()``).
    func pathSegments() -> [Substring] { self[...].pathSegments() }

    /// `lowercased()`, without making a new string when there is no ASCII capital to lower and nothing
    /// beyond ASCII (the common case for hosts, schemes and path segments).
    func lowercasedIfNeeded() -> String {
        var copy = self
        return copy.withUTF8 { Self.needsLowering($0) } ? lowercased() : copy
    }

    private static func needsLowering(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where byte >= 0x80 || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) {
            return true
        }
        return false
    }
}
