import Foundation
import LineProtocol

extension APIHealthConfiguration {
    /// Reads the configuration from environment variables: the `APIHEALTH_*`, `INFLUX_*` and, for more
    /// destinations, `INFLUX_<n>_*` variables the Configuration article's table lists.
    ///
    /// ```swift
    /// // APIHEALTH_TAGS=env=prod APIHEALTH_OBJECTIVE_AVAILABILITY=99.9 INFLUX_URL=http://influx:8086 …
    /// let configuration = try APIHealthConfiguration.fromEnvironment(serviceName: "checkout")
    /// ```
    ///
    /// - Parameters:
    ///   - environment: the variables to read (the process's by default).
    ///   - serviceName: names the default spool directory and the `User-Agent`.
    /// - Returns: The configuration the variables describe, with defaults for the rest.
    /// - Throws: ``Error`` for a value that cannot be used: an unknown setting value, an empty
    ///   `APIHEALTH_SPOOL_DIR`, an empty token file or a token holding a line break.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        serviceName: String
    ) throws(Error) -> APIHealthConfiguration {
        typealias V = EnvironmentVariable
        let variables = EnvironmentReader(environment)
        var configuration = APIHealthConfiguration(serviceName: serviceName)
        if let preset = variables[V.preset] {
            switch preset.lowercased() {
            case "app": configuration = .app(serviceName)
            case "service": configuration = .service(serviceName)
            default:
                throw .invalidSetting(name: V.preset.rawValue, reason: "\"\(preset)\" is not one of app, service")
            }
        }
        if let enabled = try variables.boolean(V.enabled) { configuration.isEnabled = enabled }
        if let precision = variables[V.precision] {
            guard let value = Precision(rawValue: precision) else { throw .unknownPrecision(precision) }
            configuration.precision = value
        }
        configuration.destinations = try InfluxDestination.allFromEnvironment(
            environment,
            notices: &configuration.notices
        )
        if let jitter = try variables.milliseconds(V.flushJitter) { configuration.batching.flushJitter = jitter }
        if let directory = variables[V.spoolDirectory] {
            guard !directory.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw .invalidSetting(
                    name: V.spoolDirectory.rawValue,
                    reason: "is set but empty; give a directory, or none to keep pending lines in memory only"
                )
            }
            configuration.spool = directory == "none" ? nil : SpoolOptions(directory: URL(fileURLWithPath: directory))
        }
        // Without a spool (`none`) nothing is written through; the setting has nothing to change.
        if let interval = try variables.milliseconds(V.writeThrough, positive: true) {
            configuration.spool?.writeThroughInterval = interval
        }
        if let delay = try variables.milliseconds(V.flushDelay) { configuration.batching.flushDelay = delay }
        if let deadline = try variables.milliseconds(V.shutdownDeadline) { configuration.shutdownDeadline = deadline }
        if let instance = variables[V.instance] { configuration.instance = instance }
        if let text = variables[V.tags] { configuration.globalTags = try globalTags(from: text) }
        if let text = variables[V.country] {
            guard let country = CountryCode(text) else {
                throw .invalidSetting(
                    name: V.country.rawValue,
                    reason: "\"\(text)\" is not an ISO 3166-1 alpha-2 country code (BR, DE, US)"
                )
            }
            configuration.country = country.code
        }
        if let text = variables[V.appVersion] {
            let version = text.trimmingCharacters(in: .whitespaces)
            configuration.appVersion = version.isEmpty ? nil : version
        }
        if let corrects = try variables.boolean(V.clockCorrection) { configuration.correctsClock = corrects }
        if let advises = try variables.boolean(V.cacheAdvice) { configuration.capture.cacheAdvice = advises }
        if let text = variables[V.countryHeader] {
            let header = text.trimmingCharacters(in: .whitespaces)
            configuration.capture.countryHeader = header.isEmpty ? nil : header
        }
        if let text = variables[V.rawPoints] {
            guard let rawPoints = RawPoints(environmentValue: text) else {
                throw .invalidSetting(
                    name: V.rawPoints.rawValue,
                    reason: "\"\(text)\" is not one of all, errors-and-slow, none"
                )
            }
            configuration.capture.rawPoints = rawPoints
        }
        if let text = variables[V.rawPointsPerSecond] {
            guard let rate = Double(text), rate.isFinite, rate > 0 else {
                throw .invalidValue(name: V.rawPointsPerSecond.rawValue, value: text)
            }
            let current = configuration.capture.rawPoints
            if current.mode == .errorsAndSlow {
                configuration.capture.rawPoints = .errorsAndSlow(
                    slowerThan: current.slowerThan,
                    sampleRate: current.sampleRate,
                    maximumPerSecond: rate
                )
            }
        }
        if let text = variables[V.hostRules] {
            configuration.capture.hostRules = text.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
        }
        if let text = variables[V.graphQLPaths] {
            // Empty: no GraphQL path, every request templated by its path.
            configuration.capture.graphQLPaths = text.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
        }
        if let interval = try variables.milliseconds(V.aggregationInterval) {
            if interval == .zero {
                configuration.aggregation = nil
                // Without interval points, only raw points count requests: all of them, unless the
                // environment asks for fewer (an error then, said at start).
                if variables[V.rawPoints] == nil { configuration.capture.rawPoints = .all }
            } else {
                configuration.aggregation?.interval = interval
            }
        }
        if let text = variables[V.maximumEndpoints] {
            guard let maximum = Int(text), maximum > 0 else {
                throw .invalidValue(name: V.maximumEndpoints.rawValue, value: text)
            }
            configuration.aggregation?.maximumEndpoints = maximum
        }
        if let text = variables[V.gzipLevel] {
            guard let level = Int(text), Gzip.levels.contains(level) else {
                throw .invalidValue(name: V.gzipLevel.rawValue, value: text)
            }
            configuration.gzipLevel = level
        }
        if let availability = try variables.percentage(V.objectiveAvailability) {
            configuration.objectives.default.availability = availability
        }
        let latencyTarget = try variables.percentage(V.objectiveLatency)
        let latencyThreshold = try variables.milliseconds(V.objectiveLatencyThreshold, positive: true)
        switch (latencyTarget, latencyThreshold) {
        case (let target?, let threshold?):
            configuration.objectives.default.latency = .init(target: target, threshold: threshold)
        case (nil, nil):
            break
        default:
            throw .invalidSetting(
                name: V.objectiveLatency.rawValue,
                reason: "set both \(V.objectiveLatency.rawValue) and \(V.objectiveLatencyThreshold.rawValue)"
            )
        }
        return configuration
    }

    /// `key=value,key=value` as `APIHEALTH_TAGS` gives them (a `\\` keeps the next `,` or `=` as text).
    static func globalTags(from text: String) throws(Error) -> [String: String] {
        var tags: [String: String] = [:]
        var pairs: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "," {
                pairs.append(current)
                current = ""
            } else {
                current.append(character == "=" ? "\u{0}" : character)
            }
        }
        pairs.append(current)
        for pair in pairs where !pair.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = pair.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw .invalidSetting(name: "APIHEALTH_TAGS", reason: "\"\(pair)\" is not key=value")
            }
            let key = parts[0].trimmingCharacters(in: .whitespaces)
            tags[key] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return tags
    }
}
