import Foundation
import LineProtocol

extension APIHealthConfiguration {
    /// Checks the settings that cannot be checked by their types; ``APIHealthAgent`` does at start.
    ///
    /// - Throws: ``Error`` for the first setting that cannot be used: a reserved or empty global tag, an
    ///   interval that is not a whole number of the precision's unit, raw points other than `all` without
    ///   aggregation, a batch or cap too small, a retry policy that cannot work, a bad URL, token or header.
    public func validate() throws(Error) {
        for (key, value) in globalTags {
            if PointSchema.reservedTags.contains(key) {
                throw .invalidSetting(
                    name: "globalTags",
                    reason:
                        "\"\(key)\" is a tag the agent writes itself (\(PointSchema.reservedTags.sorted().joined(separator: ", "))); set serviceName or instance for those, or pick another key"
                )
            }
            if key.isEmpty || key.hasPrefix("_") {
                throw .invalidSetting(
                    name: "globalTags",
                    reason: "\"\(key)\": a tag key must not be empty or start with _"
                )
            }
            if value.isEmpty {
                throw .invalidSetting(
                    name: "globalTags",
                    reason: "\"\(key)\" has an empty value, which line protocol cannot carry"
                )
            }
            if key == PointSchema.Tag.country, CountryCode(value)?.code != value {
                throw .invalidSetting(
                    name: "country",
                    reason: "\"\(value)\" is not an ISO 3166-1 alpha-2 country code in upper case (BR, DE, US)"
                )
            }
        }
        if let header = capture.countryHeader,
            header.isEmpty || !header.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") })
        {
            throw .invalidSetting(name: "capture.countryHeader", reason: "\"\(header)\" is not a header name")
        }
        if let aggregation {
            let unit = Duration.nanoseconds(precision.nanosecondsPerUnit)
            if aggregation.interval < unit || aggregation.interval < .milliseconds(1)
                || (RequestSchema.wholeNanoseconds(aggregation.interval) ?? 1) % precision.nanosecondsPerUnit != 0
            {
                throw .invalidSetting(
                    name: "aggregation.interval",
                    reason:
                        "\(aggregation.interval) must be at least 1 ms and a whole number of the precision's unit (\(precision.rawValue)), so interval points never share a timestamp"
                )
            }
            if aggregation.measurement.isEmpty || aggregation.measurement.hasPrefix("_") {
                throw .invalidValue(name: "aggregation.measurement", value: aggregation.measurement)
            }
            if aggregation.maximumEndpoints < 1 {
                throw .invalidValue(name: "aggregation.maximumEndpoints", value: "\(aggregation.maximumEndpoints)")
            }
        } else if capture.rawPoints != .all {
            throw .invalidSetting(
                name: "capture.rawPoints",
                reason:
                    "\(capture.rawPoints) needs aggregation: without it the requests not written would not be counted anywhere (set capture.rawPoints = .all)"
            )
        }
        let perSecond = capture.rawPoints.maximumPerSecond
        if !perSecond.isFinite || perSecond <= 0 {
            throw .invalidValue(name: "capture.rawPoints.maximumPerSecond", value: "\(perSecond)")
        }
        for rule in capture.hostRules where HostPattern(rule) == nil {
            throw .invalidSetting(
                name: "capture.hostRules",
                reason: "\"\(rule)\" is not a host name, host:port or *.domain"
            )
        }
        if capture.rawPoints.sampleRate.isNaN || !(0...1).contains(capture.rawPoints.sampleRate) {
            throw .invalidValue(name: "capture.rawPoints.sampleRate", value: "\(capture.rawPoints.sampleRate)")
        }
        if batching.maximumLines < 1 {
            throw .invalidValue(name: "batching.maximumLines", value: "\(batching.maximumLines)")
        }
        if batching.maximumBytes < 1_024 {
            throw .invalidValue(name: "batching.maximumBytes", value: "\(batching.maximumBytes)")
        }
        if batching.maximumPendingBytes < 2 * batching.maximumBytes {
            throw .invalidValue(name: "batching.maximumPendingBytes", value: "\(batching.maximumPendingBytes)")
        }
        if !Gzip.levels.contains(gzipLevel) { throw .invalidValue(name: "gzipLevel", value: "\(gzipLevel)") }
        if measurement.isEmpty || measurement.hasPrefix("_") {
            throw .invalidValue(name: "measurement", value: measurement)
        }
        if let spool, spool.directory.path.isEmpty {
            throw .invalidSetting(name: "spool.directory", reason: "is empty")
        }
        if let spool, spool.writeThroughInterval <= .zero {
            throw .invalidValue(name: "spool.writeThroughInterval", value: "\(spool.writeThroughInterval)")
        }
        if batching.flushJitter < .zero {
            throw .invalidValue(name: "batching.flushJitter", value: "\(batching.flushJitter)")
        }
        try retry.validate()
        if let problem = objectives.problem() { throw .invalidSetting(name: "objectives", reason: problem) }
        if aggregation == nil && !objectives.isEmpty {
            throw .invalidSetting(
                name: "objectives",
                reason: "objectives travel on the interval points; set aggregation (APIHEALTH_AGGREGATION_INTERVAL_MS)"
            )
        }
        if let propagation = capture.tracePropagation {
            if propagation.firstPartyHosts.isEmpty {
                throw .invalidSetting(name: "capture.tracePropagation", reason: "names no first-party host")
            }
            for host in propagation.firstPartyHosts where HostPattern(host) == nil {
                throw .invalidSetting(
                    name: "capture.tracePropagation",
                    reason: "\"\(host)\" is not a host name, host:port or *.domain"
                )
            }
        }
        for rule in capture.successRules {
            if let problem = rule.problem() { throw .invalidSetting(name: "capture.successRules", reason: problem) }
        }
        if destinations.count > DestinationCursors.maximum {
            throw .invalidSetting(name: "destinations", reason: "at most \(DestinationCursors.maximum)")
        }
        for destination in destinations {
            try destination.validate()
            if let cap = destination.maximumPendingBytes, cap < 2 * batching.maximumBytes {
                throw .invalidValue(name: "destination.maximumPendingBytes", value: "\(cap)")
            }
            if let own = destination.precision, own.nanosecondsPerUnit < precision.nanosecondsPerUnit {
                throw .invalidSetting(
                    name: "destination.precision",
                    reason:
                        "\(own.rawValue) is finer than the agent's precision \(precision.rawValue); set the agent's to the finest"
                )
            }
        }
    }
}
