/// What a response's headers say about caching it (RFC 9111), as a client's own (private) cache reads
/// them: whether it may be stored, how long it stays fresh, and whether it can be revalidated.
///
/// ```swift
/// let policy = CachePolicy(method: "GET", statusCode: 200, header: { response.value(forHTTPHeaderField: $0) })
/// if policy.storable, policy.freshFor == nil { print("storable, but the server states no lifetime") }
/// ```
package struct CachePolicy: Sendable, Hashable {
    /// Whether a cache may store the response: a method a cache stores (GET; HEAD's headers too), a status
    /// cacheable by default or an explicit lifetime, and no `no-store`.
    package var storable: Bool
    /// `Cache-Control: no-store`: the server asks that nothing keep it.
    package var noStore: Bool
    /// `Cache-Control: no-cache`: storable, but to be revalidated before every use.
    package var noCache: Bool
    /// The lifetime the server states, in seconds: `max-age` (a private cache ignores `s-maxage`), else
    /// `Expires` minus `Date`; `nil` when it states none.
    package var freshFor: Int64?
    /// An `ETag` or `Last-Modified`: the client could ask again conditionally and be answered 304.
    package var validator: Bool

    /// Statuses a cache may store without an explicit lifetime (RFC 9110 section 15.1).
    static let cacheableByDefault: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The policy of a response to `method` with `statusCode`, reading its headers through `header`
    /// (case-insensitive names; `nil` for a header the response lacks).
    package init(method: String, statusCode: Int, header: (String) -> String?) {
        var noStore = false
        var noCache = false
        var maxAge: Int64?
        if let cacheControl = header("Cache-Control") {
            for directive in cacheControl.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1)
                guard let rawName = parts.first else { continue }
                let name = rawName.trimmingSpaces.lowercased()
                switch name {
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "max-age":
                    // A malformed max-age makes the response stale (RFC 9111 section 4.2.1).
                    let value = parts.count > 1 ? parts[1].trimmingSpaces.trimmingQuotes : ""
                    maxAge = Int64(value).map { max(0, $0) } ?? 0
                default: break
                }
            }
        }
        var freshFor = maxAge
        if freshFor == nil, let expires = header("Expires") {
            // An invalid Expires (such as "0") means already expired.
            if let expiresAt = HTTPDate.secondsSinceEpoch(expires),
                let date = header("Date").flatMap(HTTPDate.secondsSinceEpoch)
            {
                freshFor = max(0, expiresAt - date)
            } else {
                freshFor = 0
            }
        }
        let cacheableMethod = method == "GET" || method == "HEAD"
        self.noStore = noStore
        self.noCache = noCache
        self.freshFor = freshFor
        self.validator = header("ETag") != nil || header("Last-Modified") != nil
        self.storable =
            cacheableMethod && !noStore && (Self.cacheableByDefault.contains(statusCode) || freshFor != nil)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }

    fileprivate var trimmingQuotes: Substring {
        guard count >= 2, first == "\"", last == "\"" else { return self }
        return dropFirst().dropLast()
    }
}
