import Foundation

/// A host as a setting names it: `api.example.com` (any port), `api.example.com:8443` (that port only)
/// or `*.example.com` (every subdomain of `example.com`, not `example.com` itself); an IPv6 address
/// bare (`::1`) or in brackets with a port (`[::1]:8443`). Case does not matter.
struct HostPattern: Sendable, Hashable {
    /// The host name, lowercased, without the `*.` of a wildcard.
    private let name: String
    private let port: Int?
    private let coversSubdomains: Bool

    /// `nil` for an empty name, a name with `/`, or a port that is not a number.
    init?(_ text: String) {
        var rest = Substring(text.lowercased())
        var port: Int?
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":", let number = Int(after.dropFirst()), (0...65_535).contains(number) else {
                    return nil
                }
                port = number
            }
            rest = rest[rest.index(after: rest.startIndex)..<close]
        } else if rest.filter({ $0 == ":" }).count == 1, let colon = rest.lastIndex(of: ":") {
            guard let number = Int(rest[rest.index(after: colon)...]), (0...65_535).contains(number) else { return nil }
            port = number
            rest = rest[..<colon]
        }
        coversSubdomains = rest.hasPrefix("*.")
        if coversSubdomains { rest = rest.dropFirst(2) }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("*") else { return nil }
        name = String(rest)
        self.port = port
    }

    /// The name a pattern's text gives, lowercased, without its port: `*.Example.com:8443` → `*.example.com`.
    static func name(of text: String) -> String {
        let lowered = text.lowercased()
        if lowered.hasPrefix("["), let close = lowered.firstIndex(of: "]") {
            return String(lowered[lowered.index(after: lowered.startIndex)..<close])
        }
        if lowered.filter({ $0 == ":" }).count == 1, let colon = lowered.lastIndex(of: ":") {
            return String(lowered[..<colon])
        }
        return lowered
    }

    /// Whether `host` (lowercased) on `port` is one this pattern names.
    func matches(host: String, port: Int?) -> Bool {
        if let own = self.port, own != port { return false }
        guard coversSubdomains else { return host == name }
        return host.count > name.count + 1 && host.hasSuffix(name) && host.dropLast(name.count).last == "."
    }

    /// Whether `url`'s host is one this pattern names (its port the scheme's default when it names none).
    func matches(_ url: URL) -> Bool {
        matches(URLParts(scheme: url.scheme, host: url.host, port: url.port, path: ""))
    }

    /// Whether the host of a URL with `parts` is one this pattern names (its port the scheme's default
    /// when it names none).
    func matches(_ parts: URLParts) -> Bool {
        guard var host = parts.host?.lowercased() else { return false }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let scheme = parts.scheme?.lowercased()
        return matches(host: host, port: parts.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil))
    }
}
