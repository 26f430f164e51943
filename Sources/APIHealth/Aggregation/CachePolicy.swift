import LineProtocol

/// What a response's headers say about caching it (RFC 9111), as a client's own (private) cache reads
/// them: whether it may be stored, how long it stays fresh, whether it can be revalidated, and whether it
/// is one user's (never for a shared cache).
///
/// ```swift
/// let policy = CachePolicy(
///     method: "GET", statusCode: 200,
///     requestHeader: { request.value(forHTTPHeaderField: $0) },
///     header: { response.value(forHTTPHeaderField: $0) })
/// if policy.perUser { print("for the client's own cache only") }
/// ```
package struct CachePolicy: Sendable, Hashable {
    /// Whether a cache may store the response: a method a cache stores (GET; HEAD's headers too), a status
    /// cacheable by default, an explicit lifetime or `public`, and no `no-store`.
    package var storable: Bool
    /// Whether a cache could keep the response were its headers to allow it: a method a cache stores (GET,
    /// HEAD) and a status cacheable by default, a stated lifetime or `public`, whatever `no-store` says. The
    /// cache advisor simulates a cache over these: what it would have served if the server allowed it.
    package var cacheableResponse: Bool
    /// `Cache-Control: no-store`: the server asks that nothing keep it.
    package var noStore: Bool
    /// `Cache-Control: no-cache` without field names: storable, but to be revalidated before every use. The
    /// qualified form (`no-cache="Set-Cookie"`) only keeps the named fields from reuse (RFC 9111 section
    /// 5.2.2.4), and is not this.
    package var noCache: Bool
    /// The response's freshness lifetime, in seconds: `max-age` (a private cache ignores `s-maxage`; a value
    /// past 2³¹ is 2³¹, RFC 9111 section 1.2.2), else `Expires` minus `Date` (minus the time received when
    /// there is no `Date`), else a tenth of the time since `Last-Modified` for a status cacheable by default
    /// (the heuristic client caches apply, RFC 9111 section 4.2.2); `nil` when none applies.
    package var freshFor: Int64?
    /// ``freshFor`` is the `Last-Modified` heuristic, not stated by the server.
    package var heuristic: Bool
    /// An `ETag` or `Last-Modified`: the client could ask again conditionally and be answered 304.
    package var validator: Bool
    /// The `Age` the response came with, in seconds (0 without one; a value past 2³¹ is 2³¹).
    package var age: Int64
    /// The response is one user's: the request carried `Authorization` (and the response says none of
    /// `public`, `s-maxage`, `must-revalidate`, RFC 9111 section 3.5) or `Cookie`, or the response says
    /// `private` (unqualified), sets a cookie, or varies on `*`, `Authorization` or `Cookie`. The client's
    /// own cache may keep it; a shared cache must not.
    package var perUser: Bool
    /// `Vary: *`: no later request matches it (RFC 9111 section 4.1).
    package var varyAll: Bool
    /// A digest of the request's values of the headers `Vary` names (0 when it names none): part of the
    /// cache key, so that each variant is a key of its own.
    package var varyDigest: UInt64

    /// The largest delta-seconds value a cache represents (RFC 9111 section 1.2.2).
    static let deltaSecondsLimit: Int64 = 1 << 31

    /// Statuses a cache may store without an explicit lifetime (RFC 9110 section 15.1).
    static let cacheableByDefault: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The policy of a response to `method` with `statusCode`, reading the request's headers through
    /// `requestHeader` and the response's through `header` (case-insensitive names; `nil` for a header
    /// it lacks). `receivedAt` is when the response came, in seconds since 1970 on the device's clock: what
    /// `Expires` counts from when the response has no `Date`.
    package init(
        method: String,
        statusCode: Int,
        requestHeader: (String) -> String? = { _ in nil },
        receivedAt: Int64 = Timestamp.systemNow().nanosecondsSinceEpoch / 1_000_000_000,
        header: (String) -> String?
    ) {
        var directives = CacheControl()
        if let cacheControl = header("Cache-Control") { directives.read(cacheControl) }
        var freshFor = directives.maxAge
        var heuristic = false
        let date = header("Date").flatMap(HTTPDate.secondsSinceEpoch)
        if freshFor == nil, let expires = header("Expires") {
            // An invalid Expires (such as "0") means already expired.
            if let expiresAt = HTTPDate.secondsSinceEpoch(expires) {
                freshFor = max(0, expiresAt - (date ?? receivedAt))
            } else {
                freshFor = 0
            }
        }
        let lastModified = header("Last-Modified")
        if freshFor == nil, Self.cacheableByDefault.contains(statusCode),
            let modifiedAt = lastModified.flatMap(HTTPDate.secondsSinceEpoch)
        {
            freshFor = max(0, (date ?? receivedAt) - modifiedAt) / 10
            heuristic = true
        }
        let cacheableMethod = method == "GET" || method == "HEAD"
        self.noStore = directives.noStore
        self.noCache = directives.noCache
        self.freshFor = freshFor
        self.heuristic = heuristic
        self.validator = header("ETag") != nil || lastModified != nil
        self.age = header("Age").flatMap { CacheControl.deltaSeconds(Substring($0)) } ?? 0
        self.cacheableResponse =
            cacheableMethod
            && (Self.cacheableByDefault.contains(statusCode) || directives.maxAge != nil
                || header("Expires") != nil || directives.isPublic)
        self.storable = cacheableResponse && !noStore
        var varyAll = false
        var variesPerUser = false
        var varyDigest = BodyDigest()
        if let vary = header("Vary") {
            for name in vary.split(separator: ",") {
                let field = name.trimmingSpaces.lowercased()
                if field.isEmpty { continue }
                if field == "*" { varyAll = true }
                if field == "authorization" || field == "cookie" { variesPerUser = true }
                varyDigest.update(field.utf8)
                varyDigest.update(CollectionOfOne(0))
                if let value = requestHeader(field) { varyDigest.update(value.utf8) }
                varyDigest.update(CollectionOfOne(0xFF))
            }
        }
        self.varyAll = varyAll
        self.varyDigest = varyDigest.length == 0 ? 0 : varyDigest.value
        let sharedDespiteAuthorization = directives.isPublic || directives.sharedMaxAge || directives.mustRevalidate
        self.perUser =
            (requestHeader("Authorization") != nil && !sharedDespiteAuthorization)
            || requestHeader("Cookie") != nil || directives.isPrivate || header("Set-Cookie") != nil
            || varyAll || variesPerUser
    }
}

/// The `Cache-Control` directives the policy reads (RFC 9111 section 5.2.2).
private struct CacheControl {
    var noStore = false
    var noCache = false
    var isPrivate = false
    var isPublic = false
    var sharedMaxAge = false
    var mustRevalidate = false
    var maxAge: Int64?

    mutating func read(_ header: String) {
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            guard let rawName = parts.first else { continue }
            let name = rawName.trimmingSpaces.lowercased()
            let argument = parts.count > 1 ? parts[1].trimmingSpaces.trimmingQuotes : nil
            switch name {
            case "no-store": noStore = true
            // The qualified forms name fields only those fields are kept from: not the whole response.
            case "no-cache": if argument == nil || argument?.isEmpty == true { noCache = true }
            case "private": if argument == nil || argument?.isEmpty == true { isPrivate = true }
            case "public": isPublic = true
            case "s-maxage": sharedMaxAge = true
            case "must-revalidate": mustRevalidate = true
            case "max-age":
                // A malformed max-age makes the response stale (RFC 9111 section 4.2.1).
                maxAge = argument.flatMap(Self.deltaSeconds) ?? 0
            default: break
            }
        }
    }

    /// A delta-seconds value: digits only, capped at 2³¹; `nil` when it is not one.
    static func deltaSeconds(_ text: Substring) -> Int64? {
        let digits = text.trimmingSpaces
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(digits).map { min($0, CachePolicy.deltaSecondsLimit) } ?? CachePolicy.deltaSecondsLimit
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
