/// Turns request paths into low-cardinality templates before they become tags.
///
/// ```swift
/// let templater = PathTemplater(rules: ["api.example.com/users/*/orders/**"])
/// templater.template(host: "api.example.com", path: "/users/8271/orders/9f3a/items")  // "/users/*/orders/**"
/// templater.template(host: "other.com", path: "/users/8271/avatar")               // "/users/{id}/avatar"
/// ```
///
/// User rules (Firebase style: `*` one segment, `**` the rest; a rule starting with `/` fits every
/// host) win over the automatic rules, which replace numeric ids (`{id}`), UUIDs (`{uuid}`), long hex
/// (`{hex}`), email addresses (`{email}`) and opaque tokens (`{token}`).
package struct PathTemplater: Sendable {
    private struct Rule: Sendable {
        var host: String?
        var segments: [Substring]
        var template: String
    }

    private let rules: [Rule]

    package init(rules: [String] = []) {
        self.rules = rules.map { text in
            let slash = text.firstIndex(of: "/") ?? text.endIndex
            let host = text[..<slash].lowercased()
            let path = text[slash...]
            return Rule(
                host: host.isEmpty || host == "*" ? nil : host,
                segments: path.split(separator: "/", omittingEmptySubsequences: true),
                template: path.isEmpty ? "/" : String(path)
            )
        }
    }

    /// The template of `path` on `host` (lowercased, with any port), from the rules alone: what the
    /// agent writes also depends on what it has learned of the traffic (see the README).
    package func template(host: String, path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        if let ruled = ruleTemplate(host: host, segments: segments) { return ruled }
        if segments.isEmpty { return "/" }
        var result = ""
        for segment in segments {
            result += "/"
            result += Self.placeholder(for: segment) ?? String(segment)
        }
        return result
    }

    /// The template of the first user rule that matches, if any.
    func ruleTemplate(host: String, segments: [Substring]) -> String? {
        guard !rules.isEmpty else { return nil }
        let bareHost = host.split(separator: ":").first.map(String.init)
        for rule in rules where rule.host == nil || rule.host == host || rule.host == bareHost {
            if Self.matches(rule.segments[...], segments[...]) { return rule.template }
        }
        return nil
    }

    private static func matches(_ pattern: ArraySlice<Substring>, _ segments: ArraySlice<Substring>) -> Bool {
        guard let first = pattern.first else { return segments.isEmpty }
        if first == "**" { return true }
        guard let segment = segments.first else { return false }
        if first != "*" && first != segment { return false }
        return matches(pattern.dropFirst(), segments.dropFirst())
    }

    /// The placeholder for an identifier-like segment, or `nil` to keep it.
    static func placeholder(for segment: Substring) -> String? {
        let bytes = Array(segment.utf8)
        let digits = bytes.filter { $0 >= 48 && $0 <= 57 }.count
        let hex = bytes.filter { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }.count
        if digits == bytes.count { return "{id}" }
        if bytes.count == 36, bytes[8] == 45, bytes[13] == 45, bytes[18] == 45, bytes[23] == 45, hex == 32 {
            return "{uuid}"
        }
        if bytes.count >= 12 && hex == bytes.count && digits > 0 { return "{hex}" }
        if bytes.contains(64), bytes.contains(46) { return "{email}" }
        let tokenBytes = bytes.allSatisfy { byte in
            (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                || byte == 45 || byte == 95 || byte == 46 || byte == 61 || byte == 43 || byte == 126 || byte == 37
        }
        let letters = bytes.filter { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }.count
        if tokenBytes && bytes.count >= 16 && digits > 0 && letters > 0 { return "{token}" }
        if digits >= 3 && digits * 2 >= bytes.count { return "{id}" }
        return nil
    }
}
