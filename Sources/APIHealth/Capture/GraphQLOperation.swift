import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The operation of a request to a GraphQL endpoint, as the last segment of its `path` tag:
/// `/graphql/GetUser` (see ``APIHealthConfiguration/CaptureOptions/graphQLPaths``).
///
/// ```swift
/// GraphQLOperation.segment(body: Array(#"{"query":"…","operationName":"GetUser"}"#.utf8), query: nil)  // "GetUser"
/// GraphQLOperation.segment(body: nil, query: "operationName=GetUser&query=…")                             // "GetUser"
/// ```
///
/// Where the operation is read from, first found first:
/// 1. the JSON body's `operationName` (a string; `null` or `""` is none), its first
///    ``maximumBodyBytes`` read by a small scanner that stops at the name (no document is built);
/// 2. the URL's `operationName` query item (a `GET`);
/// 3. the persisted query's hash, `extensions.persistedQuery.sha256Hash`, in the body or in the URL's
///    `extensions` query item: ``persistedPrefix`` and its first 8 hex digits, `{sha256:ecf4edb4}`.
///
/// Else the segment says why there is no name: ``anonymous`` (the document names no operation),
/// ``batch`` (a JSON array of operations), ``unknown`` (a body that cannot be read without consuming it,
/// is not JSON, or whose name would lie past the bytes read). A name is taken as GraphQL defines names,
/// `[_A-Za-z][_0-9A-Za-z]*`, as the JSON writes it (an escape in it makes it no name): a longer one is cut
/// to ``maximumNameBytes`` (still a name), anything else is ``invalid`` — so a hostile client cannot put
/// arbitrary text in a tag. Every segment then counts against
/// ``APIHealthConfiguration/CaptureOptions/maximumDistinctPaths`` like any path.
package enum GraphQLOperation {
    /// A document without an operation name or a persisted query's hash.
    package static let anonymous = "{anonymous}"
    /// A body that is a JSON array: several operations in one request.
    package static let batch = "{batch}"
    /// A body not read (a stream), not JSON, or cut off before a name was found.
    package static let unknown = "{unknown}"
    /// An `operationName` (or hash) that is not a GraphQL name (or hex digits).
    package static let invalid = "{invalid}"
    /// The start of a persisted query's segment, followed by 8 hex digits and `}`.
    package static let persistedPrefix = "{sha256:"
    /// The longest name kept; a longer one is cut to it.
    package static let maximumNameBytes = 64
    /// How much of a body is read for the name.
    package static let maximumBodyBytes = 64 * 1024
    /// Hex digits of a persisted query's hash kept in its segment.
    package static let hashDigits = 8

    /// The path segment of the operation a request to a GraphQL path carries: `body` its bytes (`nil`
    /// when it has none; see ``segment(unreadableBodyWithQuery:)`` for one that cannot be read), `query` its
    /// URL's query (percent-encoded, without `?`).
    package static func segment(body: [UInt8]?, query: String?) -> String {
        segment(bodyReading: body.map(read), query: query)
    }

    /// The segment of a request whose body cannot be read without consuming it (a stream), from its URL.
    package static func segment(unreadableBodyWithQuery query: String?) -> String {
        segment(bodyReading: .unreadable, query: query)
    }

    /// The segment of a request whose body is `body` (its first ``maximumBodyBytes`` read).
    package static func segment(bodyBytes body: UnsafeRawBufferPointer, query: String?) -> String {
        let bounded = Array(body.prefix(maximumBodyBytes))
        return segment(bodyReading: read(bounded, truncated: body.count > bounded.count), query: query)
    }

    /// The GraphQL operation's segment of a URLSession request to a GraphQL path (`url` its URL's text):
    /// its `httpBody` is read, a body stream never (it cannot be read without consuming it); a request other
    /// than a `GET` without `httpBody` (a stream, an upload task's body) is ``unknown`` unless its URL names
    /// the operation.
    static func segment(of request: URLRequest, url: String) -> String {
        let query = GraphQLEndpoints.query(of: url)
        if let body = request.httpBody {
            return body.withUnsafeBytes { segment(bodyBytes: $0, query: query) }
        }
        // A body stream, or a body the task holds (an upload task's, `upload(for:from:)`), is not in the request.
        if request.httpBodyStream != nil || (request.httpMethod ?? "GET") != "GET" {
            return segment(unreadableBodyWithQuery: query)
        }
        return segment(body: nil, query: query)
    }

    private static func segment(bodyReading: BodyReading?, query: String?) -> String {
        var hash: String?
        var bodyUnknown = false
        switch bodyReading {
        case .none: break
        case .unreadable: bodyUnknown = true
        case .batch: return batch
        case .read(let name, let bodyHash, let complete):
            if let name { return name }
            hash = bodyHash
            // Cut off before its end: a name may come later.
            if !complete { bodyUnknown = true }
        }
        let items = query.flatMap(queryItems)
        if let name = items?["operationName"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return sanitisedName(Array(name.utf8))
        }
        if hash == nil, let extensions = items?["extensions"] {
            // The item is the `extensions` object itself.
            if case .read(_, let queryHash, _) = read(Array(#"{"extensions":"#.utf8) + Array(extensions.utf8) + [0x7D])
            {
                hash = queryHash
            }
        }
        if let hash { return hash }
        return bodyUnknown ? unknown : anonymous
    }

    /// What a body said.
    private enum BodyReading {
        /// Not readable without consuming it.
        case unreadable
        /// A JSON array.
        case batch
        /// An object: its name's segment and its hash's, if found; `complete` when it was read to its end.
        case read(name: String?, hash: String?, complete: Bool)
    }

    private static func read(_ body: [UInt8]) -> BodyReading {
        if body.count > maximumBodyBytes { return read(Array(body.prefix(maximumBodyBytes)), truncated: true) }
        return read(body, truncated: false)
    }

    /// Reads the top-level object of `body` for its `operationName` and
    /// `extensions.persistedQuery.sha256Hash`; `truncated` when more of the body was not given.
    private static func read(_ body: [UInt8], truncated: Bool) -> BodyReading {
        var scanner = Scanner(bytes: body)
        scanner.skipBOMAndWhitespace()
        // An empty body names nothing.
        guard let first = scanner.peek() else { return .read(name: nil, hash: nil, complete: !truncated) }
        if first == UInt8(ascii: "[") { return .batch }
        guard first == UInt8(ascii: "{") else { return .read(name: nil, hash: nil, complete: false) }
        var hash: String?
        do throws(Scanner.Stop) {
            try scanner.object { key, scanner throws(Scanner.Stop) in
                if key == "operationName" {
                    switch try scanner.stringOrNull() {
                    case .some(let raw) where !raw.isEmpty: throw .found(sanitisedName(raw))
                    default: return
                    }
                }
                if key == "extensions", scanner.peekAfterWhitespace() == UInt8(ascii: "{") {
                    try scanner.object { key, scanner throws(Scanner.Stop) in
                        guard key == "persistedQuery", scanner.peekAfterWhitespace() == UInt8(ascii: "{") else {
                            return try scanner.skipValue()
                        }
                        try scanner.object { key, scanner throws(Scanner.Stop) in
                            guard key == "sha256Hash" else { return try scanner.skipValue() }
                            if let raw = try scanner.stringOrNull() { hash = sanitisedHash(raw) }
                        }
                    }
                    return
                }
                try scanner.skipValue()
            }
            return .read(name: nil, hash: hash, complete: true)
        } catch {
            switch error {
            case .found(let name): return .read(name: name, hash: nil, complete: true)
            case .cutOff, .invalid: return .read(name: nil, hash: hash, complete: false)
            }
        }
    }

    /// `raw` (a JSON string's bytes as written) as a GraphQL name, cut to ``maximumNameBytes``; else ``invalid``.
    package static func sanitisedName(_ raw: [UInt8]) -> String {
        guard let first = raw.first, isNameStart(first), raw.allSatisfy(isNameByte) else { return invalid }
        return String(decoding: raw.prefix(maximumNameBytes), as: UTF8.self)
    }

    /// `raw` as a persisted query's segment: at least ``hashDigits`` hex digits, of which the first are kept
    /// (lowercased); else ``invalid``.
    static func sanitisedHash(_ raw: [UInt8]) -> String {
        guard raw.count >= hashDigits, raw.allSatisfy(isHexDigit) else { return invalid }
        return persistedPrefix + String(decoding: raw.prefix(hashDigits), as: UTF8.self).lowercased() + "}"
    }

    private static func isNameStart(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "_") || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        isNameStart(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    /// The first value of each name in a percent-encoded query (`+` left as it is, as URLComponents does).
    private static func queryItems(_ query: String) -> [String: String]? {
        var components = URLComponents()
        components.percentEncodedQuery = query
        guard let items = components.queryItems else { return nil }
        var found: [String: String] = [:]
        for item in items where found[item.name] == nil { found[item.name] = item.value ?? "" }
        return found
    }

    /// A forward-only reader of the JSON a body holds, within its bytes: strings as written (escapes left
    /// in), containers skipped to a depth of 64.
    private struct Scanner {
        enum Stop: Error {
            /// The operation's name was found: nothing more is read.
            case found(String)
            case cutOff
            case invalid
        }

        let bytes: [UInt8]
        var index = 0
        var depth = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func peekAfterWhitespace() -> UInt8? {
            skipWhitespace()
            return peek()
        }

        mutating func skipBOMAndWhitespace() {
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
            skipWhitespace()
        }

        mutating func skipWhitespace() {
            while index < bytes.count,
                bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D
            {
                index += 1
            }
        }

        mutating func next() throws(Stop) -> UInt8 {
            guard index < bytes.count else { throw .cutOff }
            defer { index += 1 }
            return bytes[index]
        }

        /// An object, each member's key handed to `member`, which reads (or skips) its value.
        mutating func object(
            _ member: (String, inout Scanner) throws(Stop) -> Void
        ) throws(Stop) {
            skipWhitespace()
            guard try next() == UInt8(ascii: "{") else { throw .invalid }
            depth += 1
            defer { depth -= 1 }
            guard depth <= 64 else { throw .invalid }
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return
            }
            while true {
                skipWhitespace()
                let key = try string()
                skipWhitespace()
                guard try next() == UInt8(ascii: ":") else { throw .invalid }
                try member(String(decoding: key, as: UTF8.self), &self)
                skipWhitespace()
                switch try next() {
                case UInt8(ascii: "}"): return
                case UInt8(ascii: ","): continue
                default: throw .invalid
                }
            }
        }

        /// A string's bytes as written between its quotes, or `nil` for `null`.
        mutating func stringOrNull() throws(Stop) -> [UInt8]? {
            skipWhitespace()
            if peek() == UInt8(ascii: "n") {
                try literal("null")
                return nil
            }
            return try string()
        }

        mutating func string() throws(Stop) -> [UInt8] {
            guard try next() == UInt8(ascii: "\"") else { throw .invalid }
            let start = index
            while true {
                let byte = try next()
                if byte == UInt8(ascii: "\"") { return Array(bytes[start..<(index - 1)]) }
                if byte == UInt8(ascii: "\\") {
                    _ = try next()
                } else if byte < 0x20 {
                    throw .invalid
                }
            }
        }

        mutating func literal(_ word: StaticString) throws(Stop) {
            let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            for byte in expected {
                guard try next() == byte else { throw .invalid }
            }
        }

        mutating func skipValue() throws(Stop) {
            skipWhitespace()
            guard let byte = peek() else { throw .cutOff }
            switch byte {
            case UInt8(ascii: "{"): try object { _, scanner throws(Stop) in try scanner.skipValue() }
            case UInt8(ascii: "["):
                index += 1
                depth += 1
                defer { depth -= 1 }
                guard depth <= 64 else { throw .invalid }
                skipWhitespace()
                if peek() == UInt8(ascii: "]") {
                    index += 1
                    return
                }
                while true {
                    try skipValue()
                    skipWhitespace()
                    switch try next() {
                    case UInt8(ascii: "]"): return
                    case UInt8(ascii: ","): continue
                    default: throw .invalid
                    }
                }
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                while let next = peek() {
                    switch next {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"),
                        UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
                        index += 1
                    default: return
                    }
                }
                throw .cutOff
            default: throw .invalid
            }
        }
    }
}

/// The paths whose requests are GraphQL operations
/// (``APIHealthConfiguration/CaptureOptions/graphQLPaths``): told apart from every other request by
/// comparing the path's bytes in the URL's text, without parsing it.
///
/// ```swift
/// let endpoints = GraphQLEndpoints(paths: ["/graphql"])
/// endpoints?.matches("https://api.example.com/graphql?operationName=GetUser")  // true
/// ```
package struct GraphQLEndpoints: Sendable {
    private let paths: [[UInt8]]

    /// `nil` when `paths` names none (GraphQL operations off).
    package init?(paths: [String]) {
        let kept = paths.filter { $0.hasPrefix("/") && $0.count > 1 }.map { path -> [UInt8] in
            var bytes = Array(path.utf8)
            while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
            return bytes
        }
        guard !kept.isEmpty else { return nil }
        self.paths = kept
    }

    /// Whether the path of the absolute URL `text` is one of the paths (a trailing `/` aside), whatever its
    /// query.
    ///
    /// Every captured request is asked this: only the scheme and the host are read through, then each path
    /// is compared where the URL's path starts, so a long path that is none of them is not read to its end.
    package func matches(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            // The path starts at the first `/` after `scheme://`.
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= bytes.count,
                bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
            else { return false }
            var start = colon + 3
            while start < bytes.count, bytes[start] != UInt8(ascii: "/") {
                if bytes[start] == UInt8(ascii: "?") || bytes[start] == UInt8(ascii: "#") { return false }
                start += 1
            }
            return paths.contains { path in
                let end = start + path.count
                guard end <= bytes.count, path.elementsEqual(UnsafeBufferPointer(rebasing: bytes[start..<end])) else {
                    return false
                }
                // The path is this one when only trailing slashes follow it, up to the query or the fragment.
                var rest = end
                while rest < bytes.count, bytes[rest] == UInt8(ascii: "/") { rest += 1 }
                return rest == bytes.count || bytes[rest] == UInt8(ascii: "?") || bytes[rest] == UInt8(ascii: "#")
            }
        }
    }

    /// The query of the absolute URL `text` (after its `?`, before any `#`), percent-encoded.
    package static func query(of text: String) -> String? {
        guard let mark = text.firstIndex(of: "?") else { return nil }
        let rest = text[text.index(after: mark)...]
        return String(rest.prefix { $0 != "#" })
    }
}
