extension PointSchema {
    /// The type a field is written with, as the schema's ``fieldTypes(of:)`` gives it.
    public enum FieldType: Sendable, Hashable {
        /// A float (`1.5`).
        case float
        /// A signed integer (`12i`).
        case int
        /// An unsigned integer (`12u`; a signed one with InfluxDB's v1 API).
        case uint
        /// A boolean.
        case bool
        /// A string.
        case string
    }

    /// The type each field of `measurement` is written with (interval points' `le_<bound>` buckets, not
    /// listed, are integers); `nil` for a measurement the schema does not have.
    ///
    /// ```swift
    /// PointSchema.fieldTypes(of: PointSchema.Measurement.request)?[PointSchema.Field.success]  // .bool
    /// ```
    ///
    /// - Parameter measurement: One of the ``Measurement`` names.
    /// - Returns: The types by field name.
    public static func fieldTypes(of measurement: String) -> [String: FieldType]? {
        switch measurement {
        case Measurement.request: return requestFieldTypes
        case Measurement.parseFailure: return parseFailureFieldTypes
        case Measurement.agent: return agentFieldTypes
        case Measurement.requestInterval: return intervalFieldTypes
        case Measurement.relay: return relayFieldTypes
        default: return nil
        }
    }

    /// The types of request points' fields: durations floats, byte counts unsigned.
    private static let requestFieldTypes: [String: FieldType] = {
        var types: [String: FieldType] = [:]
        for key in [
            Field.durationMilliseconds, Field.timeToFirstByteMilliseconds, Field.domainLookupMilliseconds,
            Field.connectMilliseconds, Field.secureConnectionMilliseconds,
        ] {
            types[key] = .float
        }
        for key in [Field.requestBytes, Field.responseBytes] { types[key] = .uint }
        for key in [Field.statusCode, Field.errors, Field.redirects] { types[key] = .int }
        for key in [Field.success, Field.reusedConnection] { types[key] = .bool }
        for key in [Field.error, Field.correlationID, Field.networkProtocol] { types[key] = .string }
        return types
    }()

    private static let parseFailureFieldTypes: [String: FieldType] = [
        Field.count: .int, Field.codingPath: .string, Field.statusCode: .int,
    ]

    /// The types of interval points' fields (beside the `le_` buckets): counts integers, durations and
    /// objectives floats, the cache fields' waiting in milliseconds (`cache_hits_ms_le_60`) floats.
    private static let intervalFieldTypes: [String: FieldType] = {
        typealias F = IntervalField
        var types: [String: FieldType] = [:]
        for key in [F.count, F.errors, F.requestBytes, F.responseBytes, F.bucketInfinity] { types[key] = .int }
        for key in [F.durationSum, F.durationMinimum, F.durationMaximum] { types[key] = .float }
        for key in transportErrorIntervalFields { types[key] = .int }
        types[F.requestsWithinLatencyObjective] = .int
        for key in [F.objectiveAvailability, F.objectiveLatency, F.objectiveLatencyMilliseconds] { types[key] = .float }
        for key in [F.cacheCoalescableMilliseconds] + F.cacheAgeBounds.map(F.cacheHitsMilliseconds(lifetime:)) {
            types[key] = .float
        }
        for key in cacheIntervalFields where types[key] == nil { types[key] = .int }
        return types
    }()

    /// The types of the agent's health points' fields: counts unsigned, the clock's offsets floats.
    private static let agentFieldTypes: [String: FieldType] = {
        var types: [String: FieldType] = [:]
        for key in agentFields { types[key] = .uint }
        types[AgentField.clockOffset] = .float
        types[AgentField.clockOffsetUncertainty] = .float
        types[AgentField.lastError] = .string
        return types
    }()

    /// The relay's health points' fields: every one an unsigned count.
    private static let relayFieldTypes = Dictionary(uniqueKeysWithValues: relayFields.map { ($0, FieldType.uint) })
}
