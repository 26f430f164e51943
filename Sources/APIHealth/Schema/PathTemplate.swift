/// Turns request paths into low-cardinality templates before they become tags.
///
/// ```swift
/// let templater = PathTemplater(rules: ["api.example.com/users/*/orders/**"])
/// templater.template(host: "api.example.com", path: "/users/8271/orders/9f3a/items")  // "/users/*/orders/**"
/// templater.template(host: "other.com", path: "/users/8271/avatar")               // "/users/{id}/avatar"
/// ```
///
/// User rules (Firebase style: `*` one segment, `**` the rest; a rule starting with `/` fits every
/// host) win over the automatic rules, which replace numeric ids (`{id}`), UUIDs (`{uuid}`), dates
/// (`{date}`), long hex (`{hex}`), email addresses (`{email}`), slugs ending in a number (`{slug}`) and
/// opaque tokens (`{token}`), each segment by its own shape. (The agent also names each position once:
/// see ``EndpointLearner``.)
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
        let segments = path.pathSegments()
        if let ruled = ruleTemplate(host: host, segments: segments) { return ruled }
        if segments.isEmpty { return "/" }
        var result = ""
        for segment in segments {
            result += "/"
            result += Self.placeholder(for: segment) ?? String(segment)
        }
        return result
    }

    /// Whether any user rule is configured.
    var hasRules: Bool { !rules.isEmpty }

    /// Whether a user rule names a segment of digits alone (`/users/42/**`): a URL's digits then decide
    /// its template, not only its shape (``URLShape``).
    var readsNumericSegments: Bool {
        rules.contains { rule in
            rule.segments.contains { segment in
                !segment.isEmpty && segment.utf8.allSatisfy { $0 &- UInt8(ascii: "0") < 10 }
            }
        }
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

    /// The placeholder for an identifier-like segment, or `nil` to keep it: `{id}` for digits (or
    /// mostly digits, `ord-123456`), `{uuid}`, `{date}` (`2024-05-17`, with or without a time), `{hex}`
    /// for 12 or more hex digits, `{email}`, `{slug}` for lowercase words and a number joined by
    /// `-` or `_` (`red-running-shoes-1234`), and `{token}` for 16 or more characters of an opaque token: letters
    /// and digits, or letters whose capitals are too many or too close together for words in camel case
    /// (a base64url token without a digit). One pass over the bytes.
    static func placeholder(for segment: Substring) -> String? {
        if let told = wordOrNumber(segment.utf8) { return told }
        return placeholderByShape(for: segment)
    }

    /// ``placeholder(for:)`` from the segment's whole shape.
    static func placeholderByShape(for segment: Substring) -> String? {
        var shape = SegmentShape()
        for byte in segment.utf8 { shape.add(byte) }
        return shape.placeholder(segment.utf8)
    }

    /// What most segments are, told without their whole shape: a number (`{id}`), or a short word of
    /// letters with at most two digits (`users`, `v2`: kept, `.some(nil)`); `nil` for any other segment.
    private static func wordOrNumber(_ bytes: Substring.UTF8View) -> String?? {
        var reading = WordOrNumber()
        let readInPlace: Bool? = bytes.withContiguousStorageIfAvailable { contiguous in
            for byte in contiguous { reading.add(byte) }
            return true
        }
        if readInPlace == nil {
            for byte in bytes { reading.add(byte) }
        }
        return reading.reading
    }

    /// ``wordOrNumber(_:)`` a byte at a time.
    struct WordOrNumber {
        private var count = 0
        private var digits = 0
        private var other = false

        mutating func add(_ byte: UInt8) {
            count += 1
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                digits += 1
            } else if byte | 0x20 < UInt8(ascii: "a") || byte | 0x20 > UInt8(ascii: "z") {
                other = true
            }
        }

        var reading: String?? {
            if other { return nil }
            if count > 0 && digits == count { return .some("{id}") }
            if count < 12 && digits < 3 { return .some(nil) }
            return nil
        }
    }
}

/// What the bytes of one path segment are made of, counted in one pass.
private struct SegmentShape {
    var count = 0
    var digits = 0
    var hexLetters = 0
    var upper = 0
    var lower = 0
    /// Bytes outside letters, digits and `-`, `_`, `.`, `=`, `+`, `~`, `%` (what an opaque token holds).
    var others = 0
    var at = false
    var dot = false
    /// `-` and `_` separators, and whether a part between them is empty, all digits, or has a letter.
    var separators = 0
    var emptyPart = false
    var digitPart = false
    var letterPart = false
    var partDigits = 0
    var partLetters = 0
    var partLength = 0
    /// `.`, `=`, `+`, `~` and `%`, which a token may hold and a slug may not.
    var tokenPunctuation = 0
    /// Whether two capitals are at most two bytes apart, and where the last one was.
    var closeCapitals = false
    var lastCapital = -10

    mutating func add(_ byte: UInt8) {
        defer { count += 1 }
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            digits += 1
            partDigits += 1
            partLength += 1
        case UInt8(ascii: "a")...UInt8(ascii: "z"):
            lower += 1
            if byte <= UInt8(ascii: "f") { hexLetters += 1 }
            partLetters += 1
            partLength += 1
        case UInt8(ascii: "A")...UInt8(ascii: "Z"):
            upper += 1
            if byte <= UInt8(ascii: "F") { hexLetters += 1 }
            if count - lastCapital <= 2 { closeCapitals = true }
            lastCapital = count
            partLetters += 1
            partLength += 1
        case UInt8(ascii: "-"), UInt8(ascii: "_"):
            separators += 1
            endPart()
        case UInt8(ascii: "."), UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "~"), UInt8(ascii: "%"):
            if byte == UInt8(ascii: ".") { dot = true }
            tokenPunctuation += 1
        case UInt8(ascii: "@"):
            at = true
            others += 1
        default:
            others += 1
        }
    }

    private mutating func endPart() {
        if partLength == 0 { emptyPart = true }
        if partLength > 0 && partDigits == partLength { digitPart = true }
        if partLetters > 0 { letterPart = true }
        partDigits = 0
        partLetters = 0
        partLength = 0
    }

    mutating func placeholder(_ bytes: Substring.UTF8View) -> String? {
        guard count > 0 else { return nil }
        endPart()
        if digits == count { return "{id}" }
        if count == 36, digits + hexLetters == 32, separators == 4, Self.isUUID(bytes) { return "{uuid}" }
        if count >= 10, Self.isDate(bytes) { return "{date}" }
        if count >= 12 && digits + hexLetters == count && digits > 0 { return "{hex}" }
        if at && dot { return "{email}" }
        let mostlyDigits = digits >= 3 && digits * 2 >= count
        let slugBytes = others == 0 && tokenPunctuation == 0
        if slugBytes && upper == 0 && separators > 0 && !emptyPart && digitPart && letterPart && !mostlyDigits {
            return "{slug}"
        }
        let letters = upper + lower
        if others == 0 && count >= 16 && letters > 0 {
            if digits > 0 { return "{token}" }
            if upper >= 2 && lower >= 2 && (closeCapitals || 3 * upper >= letters) { return "{token}" }
        }
        if mostlyDigits { return "{id}" }
        return nil
    }

    /// `8-4-4-4-12` hex digits.
    private static func isUUID(_ bytes: Substring.UTF8View) -> Bool {
        for (offset, byte) in bytes.enumerated() where offset == 8 || offset == 13 || offset == 18 || offset == 23 {
            if byte != UInt8(ascii: "-") { return false }
        }
        return true
    }

    /// `YYYY-MM-DD`, alone or followed by `T` and a time.
    private static func isDate(_ bytes: Substring.UTF8View) -> Bool {
        var value = (year: 0, month: 0, day: 0)
        for (offset, byte) in bytes.enumerated() {
            let digit = Int(byte) - Int(UInt8(ascii: "0"))
            switch offset {
            case 4, 7:
                if byte != UInt8(ascii: "-") { return false }
            case 0...9:
                guard (0...9).contains(digit) else { return false }
                if offset < 4 {
                    value.year = value.year * 10 + digit
                } else if offset < 7 {
                    value.month = value.month * 10 + digit
                } else {
                    value.day = value.day * 10 + digit
                }
            case 10:
                if byte != UInt8(ascii: "T") && byte != UInt8(ascii: "t") { return false }
            default:
                return (1...12).contains(value.month) && (1...31).contains(value.day) && value.year >= 1900
            }
        }
        return (1...12).contains(value.month) && (1...31).contains(value.day) && value.year >= 1900
    }
}
