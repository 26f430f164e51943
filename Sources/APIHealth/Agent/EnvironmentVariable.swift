/// Every environment variable ``APIHealthConfiguration/fromEnvironment(_:serviceName:)`` reads, named
/// once: the parsing reads them by these cases, and the tests check that the Configuration article
/// documents each one and that no other `APIHEALTH_` or `INFLUX_` name is read anywhere.
///
/// ```swift
/// EnvironmentVariable.objectiveAvailability.rawValue   // "APIHEALTH_OBJECTIVE_AVAILABILITY"
/// EnvironmentVariable.Destination.url.name(destination: 2)   // "INFLUX_2_URL"
/// ```
package enum EnvironmentVariable: String, CaseIterable, Sendable {
    case enabled = "APIHEALTH_ENABLED"
    case precision = "INFLUX_PRECISION"
    case spoolDirectory = "APIHEALTH_SPOOL_DIR"
    case writeThrough = "APIHEALTH_WRITE_THROUGH_MS"
    case flushDelay = "APIHEALTH_FLUSH_DELAY_MS"
    case flushJitter = "APIHEALTH_FLUSH_JITTER_MS"
    case shutdownDeadline = "APIHEALTH_SHUTDOWN_DEADLINE_MS"
    case gzipLevel = "APIHEALTH_GZIP_LEVEL"
    case instance = "APIHEALTH_INSTANCE"
    case tags = "APIHEALTH_TAGS"
    case country = "APIHEALTH_COUNTRY"
    case preset = "APIHEALTH_PRESET"
    case appVersion = "APIHEALTH_APP_VERSION"
    case clockCorrection = "APIHEALTH_CLOCK_CORRECTION"
    case countryHeader = "APIHEALTH_COUNTRY_HEADER"
    case cacheAdvice = "APIHEALTH_CACHE_ADVICE"
    case rawPoints = "APIHEALTH_RAW_POINTS"
    case rawPointsPerSecond = "APIHEALTH_RAW_POINTS_PER_SECOND"
    case maximumEndpoints = "APIHEALTH_MAXIMUM_ENDPOINTS"
    case hostRules = "APIHEALTH_HOST_RULES"
    case graphQLPaths = "APIHEALTH_GRAPHQL_PATHS"
    case aggregationInterval = "APIHEALTH_AGGREGATION_INTERVAL_MS"
    case objectiveAvailability = "APIHEALTH_OBJECTIVE_AVAILABILITY"
    case objectiveLatency = "APIHEALTH_OBJECTIVE_LATENCY"
    case objectiveLatencyThreshold = "APIHEALTH_OBJECTIVE_LATENCY_MS"

    /// A destination's settings: `INFLUX_<suffix>` for the first, `INFLUX_<n>_<suffix>` for the n-th.
    package enum Destination: String, CaseIterable, Sendable {
        case url = "URL"
        case writeAPI = "WRITE_API"
        case organization = "ORG"
        case bucket = "BUCKET"
        case database = "DATABASE"
        case retentionPolicy = "RETENTION_POLICY"
        case token = "TOKEN"
        case tokenFile = "TOKEN_FILE"
        case name = "NAME"
        case precision = "PRECISION"
        case headers = "HEADERS"
        case contentEncoding = "CONTENT_ENCODING"

        /// The variable of destination `destination` (1 is the first: `INFLUX_URL`; 2 is `INFLUX_2_URL`).
        package func name(destination: Int) -> String {
            destination == 1 ? "INFLUX_" + rawValue : "INFLUX_\(destination)_" + rawValue
        }
    }
}

/// Reads ``EnvironmentVariable``s, with one parser per kind of value.
package struct EnvironmentReader {
    private let environment: [String: String]

    init(_ environment: [String: String]) {
        self.environment = environment
    }

    subscript(_ variable: EnvironmentVariable) -> String? { environment[variable.rawValue] }

    /// A switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case).
    func boolean(_ variable: EnvironmentVariable) throws(APIHealthConfiguration.Error) -> Bool? {
        guard let text = self[variable] else { return nil }
        guard let value = Self.switchValue(text) else {
            throw .invalidSetting(name: variable.rawValue, reason: "\"\(text)\" is not one of \(Self.switchForms)")
        }
        return value
    }

    /// A switch's value: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case); `nil` for anything
    /// else. The relay's switches read the same forms.
    package static func switchValue(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: return nil
        }
    }

    /// The forms ``switchValue(_:)`` reads, as errors name them.
    package static let switchForms = "1, true, yes, on, 0, false, no, off"

    /// A whole number of milliseconds (`positive`: above zero; otherwise zero or more).
    func milliseconds(
        _ variable: EnvironmentVariable,
        positive: Bool = false
    ) throws(APIHealthConfiguration.Error) -> Duration? {
        guard let text = self[variable] else { return nil }
        guard let milliseconds = Int(text), positive ? milliseconds > 0 : milliseconds >= 0 else {
            throw .invalidValue(name: variable.rawValue, value: text)
        }
        return .milliseconds(milliseconds)
    }

    /// A percentage above 0 and below 100 (`99.9`), as a share (0.999).
    func percentage(_ variable: EnvironmentVariable) throws(APIHealthConfiguration.Error) -> Double? {
        guard let text = self[variable] else { return nil }
        let number = text.hasSuffix("%") ? String(text.dropLast()) : text
        // Read as `99.9e-2`, so the share is the double nearest 0.999 (99.9 / 100 is not).
        guard let percent = Double(number), percent > 0, percent < 100, let share = Double(number + "e-2") else {
            throw .invalidSetting(
                name: variable.rawValue,
                reason: "\"\(text)\" is not a percentage above 0 and below 100"
            )
        }
        return share
    }
}
