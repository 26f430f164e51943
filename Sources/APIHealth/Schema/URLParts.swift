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
        while index < count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            // A user, an IPv6 literal, an escape or anything not ASCII: Foundation's reading.
            if byte == UInt8(ascii: "@") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "%") || byte >= 0x80 {
                return nil
            }
            if byte == UInt8(ascii: ":") {
                guard colon == nil else { return nil }
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
            if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "%") || byte == UInt8(ascii: ";") || byte >= 0x80 { return nil }
            index += 1
        }
        var pathEnd = index
        // `URL.path` drops its trailing slashes (not the root's).
        while pathEnd - pathStart > 1, bytes[pathEnd - 1] == UInt8(ascii: "/") { pathEnd -= 1 }
        return (0..<schemeEnd, hostStart..<hostEnd, port, pathStart..<pathEnd)
    }

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
    func pathSegments() -> [Substring] {
        let bytes = utf8
        var segments: [Substring] = []
        segments.reserveCapacity(8)
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: "/") {
                if start != index { segments.append(Substring(bytes[start..<index])) }
                start = bytes.index(after: index)
            }
            bytes.formIndex(after: &index)
        }
        if start != bytes.endIndex { segments.append(Substring(bytes[start..<bytes.endIndex])) }
        return segments
    }
}

/// The non-empty segments of a path between `/`s, read one at a time as `Substring.pathSegments()` gives
/// them all (no array made).
struct PathSegments: Sequence, IteratorProtocol {
    private let path: Substring
    private var index: Substring.Index

    init(_ path: Substring) {
        self.path = path
        self.index = path.startIndex
    }

    mutating func next() -> Substring? {
        let bytes = path.utf8
        while index != bytes.endIndex, bytes[index] == UInt8(ascii: "/") { bytes.formIndex(after: &index) }
        guard index != bytes.endIndex else { return nil }
        let start = index
        while index != bytes.endIndex, bytes[index] != UInt8(ascii: "/") { bytes.formIndex(after: &index) }
        return Substring(bytes[start..<index])
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

    fileprivate static func needsLowering(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where byte >= 0x80 || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) {
            return true
        }
        return false
    }
}

extension Substring {
    /// `lowercased()`, reading the bytes in place when there is nothing to lower.
    func lowercasedIfNeeded() -> String {
        var copy = self
        return copy.withUTF8 { String.needsLowering($0) } ? lowercased() : String(copy)
    }
}
