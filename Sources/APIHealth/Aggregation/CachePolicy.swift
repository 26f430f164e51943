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
    /// Whether a cache could keep the response were its headers to allow it: a method a cache stores (GET,
    /// HEAD) and a status cacheable by default or a stated lifetime, whatever `no-store` says. The cache
    /// advisor compares these with the previous response of their URL: what a cache would have served
    /// if the server allowed it.
    package var cacheableResponse: Bool
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
        self.cacheableResponse =
            cacheableMethod && (Self.cacheableByDefault.contains(statusCode) || freshFor != nil)
        self.storable = cacheableResponse && !noStore
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

/// What the cache advisor reads of one response as its request ends: what its headers say, the digest of
/// its body, and whether a local cache served it.
///
/// ```swift
/// let evidence = CacheEvidence(policy: policy, digest: bodyReadToItsEnd ? digest : nil)
/// ```
package struct CacheEvidence: Sendable {
    /// What the response's headers say about caching it.
    package var policy: CachePolicy
    /// The digest of its body; `nil` when the body was not read to its end (dropped unread, failed).
    package var digest: BodyDigest?
    /// The platform says a local cache served it (URLSession's task metrics on Apple platforms).
    package var servedLocally: Bool

    package init(policy: CachePolicy, digest: BodyDigest?, servedLocally: Bool = false) {
        self.policy = policy
        self.digest = digest
        self.servedLocally = servedLocally
    }
}
