@_spi(Package) import APIHealth
import LineProtocol

/// The schema check of one point an install sent: only ``PointSchema``'s measurements, their tag keys
/// (and the global `country` and `app_version`, checked for what they hold), their field keys with the
/// types the agent writes them with, the key's own `service`, and a timestamp within a window of the
/// relay's clock. A point that passes is made ready to forward: integers given for a float field become
/// floats (the agent of a v1 install writes unsigned fields as integers: they become unsigned), the
/// key's environment is its `env` tag, and a point without a timestamp gets the relay's.
///
/// ```swift
/// var point = try LineParser().parseLine(Array(line.utf8))!
/// if let refusal = check.check(&point, app: app, now: now) { /* refused: count it, name the line */ }
/// ```
package struct LineCheck: Sendable {
    /// The type a field is written with: the schema's.
    package typealias FieldType = PointSchema.FieldType

    /// The longest tag value taken, in bytes: a templated path or a host name fits.
    package static let maximumTagValueBytes = 256
    /// The most tags a point may have.
    package static let maximumTags = 16
    /// The most fields a point may have: an interval point with objectives, cache advice and buckets.
    package static let maximumFields = 80
    /// The tag the key's environment is written as.
    package static let environmentTag = "env"

    let maximumAge: Duration
    let maximumAhead: Duration
    /// The window in nanoseconds, as each line's timestamp is compared with it.
    let maximumAgeNanoseconds: Int64
    let maximumAheadNanoseconds: Int64
    let restamps: Bool
    let extraTags: Set<String>
    /// What the check does with a tag key of the schema's beside checking its value's length.
    enum TagRole: Sendable {
        case plain, service, country, appVersion, environment
    }
    /// A field of the schema's: its type, and its bit among the measurement's fields (a line that names
    /// one twice is left to the careful path).
    struct FieldEntry: Sendable {
        var type: FieldType
        var bit: UInt64
    }
    /// The schema of each measurement: its tag keys and its fields' types (`le_<bound>` histogram fields
    /// are matched by their form).
    struct Measurement: Sendable {
        var tags: NameTable<TagRole>
        var fields: NameTable<FieldEntry>
        var hasBuckets: Bool
    }
    let measurements: NameTable<Measurement>
    /// Whether each two-letter code (`AA` … `ZZ`, 26 × 26) is a ``CountryCode``.
    let countries: [Bool]

    package init(
        maximumAge: Duration = .seconds(86_400),
        maximumAhead: Duration = .seconds(600),
        restamps: Bool = false,
        extraTags: Set<String> = []
    ) {
        self.maximumAge = maximumAge
        self.maximumAhead = maximumAhead
        maximumAgeNanoseconds = Self.nanoseconds(maximumAge)
        maximumAheadNanoseconds = Self.nanoseconds(maximumAhead)
        self.restamps = restamps
        self.extraTags = extraTags
        typealias S = PointSchema
        typealias M = S.Measurement
        let global: Set<String> = [S.Tag.country, S.Tag.appVersion, Self.environmentTag]
        func measurement(_ tags: [String], _ fields: [String: FieldType], buckets: Bool = false) -> Measurement {
            let keys = Set(tags).union(global).union(extraTags)
            let roles: [String: TagRole] = [
                S.Tag.service: .service, S.Tag.country: .country, S.Tag.appVersion: .appVersion,
                Self.environmentTag: .environment,
            ]
            // Every schema measurement has fewer than 64 fields: one bit each.
            let entries = fields.keys.sorted().enumerated().map { index, key in
                (key, FieldEntry(type: fields[key]!, bit: 1 << UInt64(index % 64)))
            }
            return Measurement(
                tags: NameTable(Dictionary(uniqueKeysWithValues: keys.map { ($0, roles[$0] ?? .plain) })),
                fields: NameTable(Dictionary(uniqueKeysWithValues: entries)),
                hasBuckets: buckets
            )
        }
        // Every measurement an install's agent writes, with the field types the schema gives it: not the
        // relay's own health point, which only the relay writes.
        measurements = NameTable([
            M.request: measurement(S.requestTags, S.fieldTypes(of: M.request)!),
            M.parseFailure: measurement(S.parseFailureTags, S.fieldTypes(of: M.parseFailure)!),
            M.agent: measurement(S.agentTags, S.fieldTypes(of: M.agent)!),
            M.requestInterval: measurement(S.intervalTags, S.fieldTypes(of: M.requestInterval)!, buckets: true),
        ])
        let letters = (UInt8(ascii: "A")...UInt8(ascii: "Z")).map { Character(Unicode.Scalar($0)) }
        countries = letters.flatMap { first in
            letters.map { second in
                let code = String([first, second])
                return CountryCode(code)?.code == code
            }
        }
    }

    /// Checks `point` as sent with `app`'s key at `now` (the relay's clock) and makes it ready to
    /// forward; returns why it is refused, or `nil` when it passes.
    package func check(_ point: inout Point, app: AppKeys.App, now: Timestamp) -> Refusal? {
        guard let schema = measurements[point.measurement] else { return .measurement }
        if point.tags.count > Self.maximumTags { return .tagValue }
        var service = false
        var hasEnvironment = -1
        for (index, tag) in point.tags.enumerated() {
            guard schema.tags.contains(tag.key) else { return .tag }
            if tag.value.utf8.count > Self.maximumTagValueBytes { return .tagValue }
            switch tag.key {
            case PointSchema.Tag.service:
                guard tag.value == app.name else { return .service }
                service = true
            case PointSchema.Tag.country:
                guard isCountry(tag.value) else { return .place }
            case PointSchema.Tag.appVersion:
                guard Self.isVersion(tag.value) else { return .version }
            case Self.environmentTag:
                hasEnvironment = index
            default: break
            }
        }
        guard service else { return .service }
        if point.fields.count > Self.maximumFields { return .field }
        for index in point.fields.indices {
            let key = point.fields[index].key
            let type: FieldType
            if let known = schema.fields[key] {
                type = known.type
            } else if schema.hasBuckets, Self.isBucket(key) {
                type = .int
            } else {
                return .field
            }
            guard let value = Self.coerce(point.fields[index].value, to: type) else { return .fieldType }
            point.fields[index].value = value
        }
        if let timestamp = point.timestamp {
            let offset = timestamp.nanosecondsSinceEpoch.subtractingReportingOverflow(now.nanosecondsSinceEpoch)
                .partialValue
            if offset > maximumAheadNanoseconds || offset < -maximumAgeNanoseconds {
                guard restamps else { return .timestamp }
                point.timestamp = now
            }
        } else {
            point.timestamp = now
        }
        // The key's environment, whatever the install wrote as `env`.
        if hasEnvironment >= 0 { point.tags.remove(at: hasEnvironment) }
        if !app.environment.isEmpty {
            let tag = Point.Tag(Self.environmentTag, app.environment)
            let position = point.tags.firstIndex { $0.key > Self.environmentTag } ?? point.tags.endIndex
            point.tags.insert(tag, at: position)
        }
        return nil
    }

    /// Whether `text` is a ``CountryCode`` as the agent writes one: two capital letters.
    private func isCountry(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isCountry(bytes: $0) }
    }

    /// Whether `bytes` are a ``CountryCode`` as the agent writes one: two capital letters.
    @inline(__always)
    func isCountry(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == 2 else { return false }
        let first = bytes[0] &- UInt8(ascii: "A")
        let second = bytes[1] &- UInt8(ascii: "A")
        guard first < 26, second < 26 else { return false }
        return countries[Int(first) * 26 + Int(second)]
    }

    /// `le_` and a bound the agent writes: digits, with a fraction if any (`le_300`, `le_2.5`).
    static func isBucket(_ key: String) -> Bool {
        var key = key
        return key.withUTF8 { isBucket(bytes: $0) }
    }

    /// `le_` and a bound the agent writes, from the key's bytes.
    static func isBucket(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count > 3, bytes.count <= 24, bytes[0] == UInt8(ascii: "l"), bytes[1] == UInt8(ascii: "e"),
            bytes[2] == UInt8(ascii: "_")
        else { return false }
        var dot = false
        var digits = 0
        for byte in bytes.dropFirst(3) {
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                digits += 1
            } else if byte == UInt8(ascii: "."), !dot, digits > 0 {
                dot = true
            } else {
                return false
            }
        }
        return digits > 0
    }

    /// A version as apps write them: up to 32 letters, digits, `.`, `-`, `+` and `_`, starting with a
    /// letter or digit.
    static func isVersion(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isVersion(bytes: $0) }
    }

    /// A version as apps write them, from its bytes.
    static func isVersion(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, bytes.count <= 32, isAlphanumeric(first) else { return false }
        return bytes.allSatisfy {
            isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+")
                || $0 == UInt8(ascii: "_")
        }
    }

    @inline(__always)
    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// `value` as a field of `type` holds it; `nil` when it cannot be (a string for a number, a
    /// negative count for an unsigned one, a float for an integer).
    static func coerce(_ value: FieldValue, to type: FieldType) -> FieldValue? {
        switch (value, type) {
        case (.float, .float), (.int, .int), (.uint, .uint), (.bool, .bool), (.string, .string): return value
        case (.int(let number), .float): return .float(Double(number))
        case (.uint(let number), .float): return .float(Double(number))
        case (.int(let number), .uint): return number >= 0 ? .uint(UInt64(number)) : nil
        case (.uint(let number), .int): return number <= UInt64(Int64.max) ? .int(Int64(number)) : nil
        default: return nil
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue &+ attoseconds / 1_000_000_000
    }
}
