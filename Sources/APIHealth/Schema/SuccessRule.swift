import Foundation

/// Says which statuses count as a success (`success` 1, `errors` 0) on some endpoints, where the
/// default (a status below 400 succeeds) does not fit: a lookup whose 404 means "no such user", a token
/// probe whose 401 is the expected answer.
///
/// ```swift
/// configuration.capture.successRules = [
///     .success(404, host: "api.example.com", path: "/users/{id}"),
///     .success(401, path: "/oauth/probe"),
///     .failure(200...299, host: "legacy.example.com", path: "/jobs/**"),
/// ]
/// ```
///
/// The first rule that matches a request's host, templated path, method and status decides; without
/// one, a status below 400 succeeds. A transport error (no status) always fails. The decision is made
/// once per series (host, path, method, status) and kept with it, so rules cost nothing per request.
public struct SuccessRule: Sendable, Hashable {
    /// The statuses the rule covers.
    public var statuses: [ClosedRange<Int>]
    /// The host: `api.example.com` (any port), `api.example.com:8443`, or `*.example.com` (its
    /// subdomains); `nil` for every host.
    public var host: String?
    /// The templated path as it is tagged (`/users/{id}`), where `*` stands for one segment and `**`
    /// for the rest; `nil` for every path.
    public var path: String?
    /// The method (`GET`), `nil` for every method.
    public var method: String?
    /// Whether a request the rule covers succeeds.
    public var succeeds: Bool

    /// A rule: requests it covers with a status in `statuses` succeed (`succeeds`) or fail.
    ///
    /// - Parameters:
    ///   - statuses: The statuses it covers.
    ///   - host: The host it covers; `nil` for every host.
    ///   - path: The path template it covers; `nil` for every path.
    ///   - method: The method it covers; `nil` for every method.
    ///   - succeeds: Whether those requests succeed.
    public init(
        statuses: [ClosedRange<Int>],
        host: String? = nil,
        path: String? = nil,
        method: String? = nil,
        succeeds: Bool
    ) {
        self.statuses = statuses
        self.host = host
        self.path = path
        self.method = method
        self.succeeds = succeeds
    }

    /// `statuses` succeed on the host, path and method given.
    ///
    /// - Parameters:
    ///   - statuses: The statuses that succeed.
    ///   - host: The host it covers (`api.example.com`, `api.example.com:8443`, `*.example.com`); `nil` for every host.
    ///   - path: The path template it covers (`*` one segment, `**` the rest); `nil` for every path.
    ///   - method: The method it covers (`GET`); `nil` for every method.
    /// - Returns: The rule.
    public static func success(
        _ statuses: Int...,
        host: String? = nil,
        path: String? = nil,
        method: String? = nil
    )
        -> SuccessRule
    {
        SuccessRule(statuses: statuses.map { $0...$0 }, host: host, path: path, method: method, succeeds: true)
    }

    /// The statuses in `range` succeed on the host, path and method given.
    ///
    /// - Parameters:
    ///   - range: The statuses that succeed.
    ///   - host: The host it covers (`api.example.com`, `api.example.com:8443`, `*.example.com`); `nil` for every host.
    ///   - path: The path template it covers (`*` one segment, `**` the rest); `nil` for every path.
    ///   - method: The method it covers (`GET`); `nil` for every method.
    /// - Returns: The rule.
    public static func success(
        _ range: ClosedRange<Int>,
        host: String? = nil,
        path: String? = nil,
        method: String? = nil
    ) -> SuccessRule {
        SuccessRule(statuses: [range], host: host, path: path, method: method, succeeds: true)
    }

    /// `statuses` fail on the host, path and method given.
    ///
    /// - Parameters:
    ///   - statuses: The statuses that fail.
    ///   - host: The host it covers (`api.example.com`, `api.example.com:8443`, `*.example.com`); `nil` for every host.
    ///   - path: The path template it covers (`*` one segment, `**` the rest); `nil` for every path.
    ///   - method: The method it covers (`GET`); `nil` for every method.
    /// - Returns: The rule.
    public static func failure(
        _ statuses: Int...,
        host: String? = nil,
        path: String? = nil,
        method: String? = nil
    )
        -> SuccessRule
    {
        SuccessRule(statuses: statuses.map { $0...$0 }, host: host, path: path, method: method, succeeds: false)
    }

    /// The statuses in `range` fail on the host, path and method given.
    ///
    /// - Parameters:
    ///   - range: The statuses that fail.
    ///   - host: The host it covers (`api.example.com`, `api.example.com:8443`, `*.example.com`); `nil` for every host.
    ///   - path: The path template it covers (`*` one segment, `**` the rest); `nil` for every path.
    ///   - method: The method it covers (`GET`); `nil` for every method.
    /// - Returns: The rule.
    public static func failure(
        _ range: ClosedRange<Int>,
        host: String? = nil,
        path: String? = nil,
        method: String? = nil
    ) -> SuccessRule {
        SuccessRule(statuses: [range], host: host, path: path, method: method, succeeds: false)
    }

    /// Why the rule cannot be used, if it cannot.
    func problem() -> String? {
        if statuses.isEmpty { return "names no status" }
        if let host, HostPattern(host) == nil { return "host \"\(host)\" is not a host name, host:port or *.domain" }
        if let path, !path.hasPrefix("/") { return "path \"\(path)\" does not start with /" }
        if let method, method.isEmpty { return "method is empty" }
        return nil
    }
}

/// The configured ``SuccessRule``s, parsed once: decides whether a series succeeds.
struct SuccessPolicy: Sendable {
    private struct Rule: Sendable {
        var statuses: [ClosedRange<Int>]
        var host: HostPattern?
        var path: [Substring]?
        var method: String?
        var succeeds: Bool
    }

    private let rules: [Rule]

    /// Rules that cannot be used are left out (``APIHealthConfiguration/validate()`` refuses them first).
    init(_ rules: [SuccessRule]) {
        self.rules = rules.compactMap { rule in
            guard rule.problem() == nil else { return nil }
            return Rule(
                statuses: rule.statuses,
                host: rule.host.flatMap(HostPattern.init),
                path: rule.path.map { $0.split(separator: "/", omittingEmptySubsequences: true) },
                method: rule.method?.uppercased(),
                succeeds: rule.succeeds
            )
        }
    }

    /// Whether a request to `url` tagged with `path` and `method` that ended with `statusCode` succeeds
    /// (`nil`: a transport error, which always fails).
    func succeeds(url: @autoclosure () -> URL, path: String, method: String, statusCode: Int?) -> Bool {
        guard let statusCode else { return false }
        guard !rules.isEmpty else { return statusCode < 400 }
        var segments: [Substring]?
        for rule in rules where rule.statuses.contains(where: { $0.contains(statusCode) }) {
            if let ruleMethod = rule.method, ruleMethod != method { continue }
            if let host = rule.host, !host.matches(url()) { continue }
            if let pattern = rule.path {
                if segments == nil { segments = path.pathSegments() }
                guard Self.matches(pattern[...], segments![...]) else { continue }
            }
            return rule.succeeds
        }
        return statusCode < 400
    }

    static func matches(_ pattern: ArraySlice<Substring>, _ segments: ArraySlice<Substring>) -> Bool {
        guard let first = pattern.first else { return segments.isEmpty }
        if first == "**" { return true }
        guard let segment = segments.first else { return false }
        if first != "*" && first != segment { return false }
        return matches(pattern.dropFirst(), segments.dropFirst())
    }
}
