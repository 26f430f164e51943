import Foundation

/// Every name ``PointSchema`` defines, by the name Swift gives it, as one JSON document: what the alert and
/// dashboard generators (`scripts/build-dashboards`, `scripts/alerting.py`) read instead of retyping the names.
/// `influx-tail --schema` prints it; `dashboards/schema.json` is that output, and a test fails when the two
/// differ.
///
/// ```swift
/// let json = try PointSchemaDescription.current.json()
/// // {"agentFields":{"cacheKeysEvicted":"cache_keys_evicted",…},"measurements":{"agent":"apihealth_agent",…},…}
/// ```
package struct PointSchemaDescription: Codable, Equatable, Sendable {
    /// ``PointSchema/Measurement``, by member name.
    package var measurements: [String: String]
    /// ``PointSchema/Tag``, by member name.
    package var tags: [String: String]
    /// ``PointSchema/Field`` (request and parse-failure points), by member name.
    package var fields: [String: String]
    /// ``PointSchema/IntervalField``, by member name (the bucket and cache-lifetime fields are in ``lists``).
    package var intervalFields: [String: String]
    /// ``PointSchema/AgentField``, by member name.
    package var agentFields: [String: String]
    /// ``PointSchema/RelayField``, by member name (the refusal fields are in ``lists``).
    package var relayFields: [String: String]
    /// ``PointSchema/fieldTypes(of:)`` of every measurement: `float`, `int`, `uint`, `bool` or `string` by
    /// field name.
    package var fieldTypes: [String: [String: String]]
    /// The lists ``PointSchema`` keeps (`requestTags`, `intervalFields`, `cacheIntervalFields`, …), by name.
    package var lists: [String: [String]]
    /// ``PointSchema/IntervalField/cacheAgeBounds``: the lifetimes the cache advice simulates, in seconds.
    package var cacheAgeBounds: [Int64]

    /// The schema this build writes.
    package static var current: PointSchemaDescription {
        typealias M = PointSchema.Measurement
        typealias T = PointSchema.Tag
        typealias F = PointSchema.Field
        typealias I = PointSchema.IntervalField
        typealias A = PointSchema.AgentField
        typealias R = PointSchema.RelayField
        let measurements = [
            "request": M.request, "parseFailure": M.parseFailure, "agent": M.agent,
            "requestInterval": M.requestInterval, "relay": M.relay,
        ]
        return PointSchemaDescription(
            measurements: measurements,
            tags: [
                "host": T.host, "path": T.path, "method": T.method, "module": T.module, "status": T.status,
                "statusClass": T.statusClass, "failure": T.failure, "service": T.service, "instance": T.instance,
                "country": T.country, "appVersion": T.appVersion,
            ],
            fields: [
                "durationMilliseconds": F.durationMilliseconds,
                "timeToFirstByteMilliseconds": F.timeToFirstByteMilliseconds,
                "domainLookupMilliseconds": F.domainLookupMilliseconds, "connectMilliseconds": F.connectMilliseconds,
                "secureConnectionMilliseconds": F.secureConnectionMilliseconds, "requestBytes": F.requestBytes,
                "responseBytes": F.responseBytes, "statusCode": F.statusCode, "success": F.success,
                "errors": F.errors, "error": F.error, "correlationID": F.correlationID, "redirects": F.redirects,
                "networkProtocol": F.networkProtocol, "reusedConnection": F.reusedConnection, "count": F.count,
                "codingPath": F.codingPath,
            ],
            intervalFields: [
                "count": I.count, "errors": I.errors, "durationSum": I.durationSum,
                "durationMinimum": I.durationMinimum, "durationMaximum": I.durationMaximum,
                "requestBytes": I.requestBytes, "responseBytes": I.responseBytes, "bucketInfinity": I.bucketInfinity,
                "objectiveAvailability": I.objectiveAvailability, "objectiveLatency": I.objectiveLatency,
                "objectiveLatencyMilliseconds": I.objectiveLatencyMilliseconds,
                "requestsWithinLatencyObjective": I.requestsWithinLatencyObjective, "dnsErrors": I.dnsErrors,
                "connectErrors": I.connectErrors, "tlsErrors": I.tlsErrors, "timeoutErrors": I.timeoutErrors,
                "deviceErrors": I.deviceErrors, "cancelled": I.cancelled, "cacheStorable": I.cacheStorable,
                "cacheNoStore": I.cacheNoStore, "cacheWithLifetime": I.cacheWithLifetime,
                "cacheRevalidated": I.cacheRevalidated, "cacheServedLocally": I.cacheServedLocally,
                "cacheJudged": I.cacheJudged, "cachePrivateOnly": I.cachePrivateOnly,
                "cacheCoalescable": I.cacheCoalescable, "cacheCoalescableMilliseconds": I.cacheCoalescableMilliseconds,
            ],
            agentFields: [
                "pointsRecorded": A.pointsRecorded, "pointsInvalid": A.pointsInvalid,
                "pointsRepaired": A.pointsRepaired, "pointsWritten": A.pointsWritten, "pointsDropped": A.pointsDropped,
                "pointsRejected": A.pointsRejected, "pointsExpired": A.pointsExpired, "retries": A.retries,
                "batchesWritten": A.batchesWritten, "bytesBeforeGzip": A.bytesBeforeGzip,
                "bytesAfterGzip": A.bytesAfterGzip, "pendingLines": A.pendingLines, "pendingBytes": A.pendingBytes,
                "pathsOverflowed": A.pathsOverflowed, "requestsUncaptured": A.requestsUncaptured,
                "requestsFiltered": A.requestsFiltered, "pointsLost": A.pointsLost,
                "metricsOverflowed": A.metricsOverflowed, "lastError": A.lastError, "intervalPoints": A.intervalPoints,
                "requestsOnlyAggregated": A.requestsOnlyAggregated, "endpointLimit": A.endpointLimit,
                "endpoints": A.endpoints, "requestsOverflowed": A.requestsOverflowed,
                "endpointsEvicted": A.endpointsEvicted, "cacheKeysEvicted": A.cacheKeysEvicted,
                "countryValuesIgnored": A.countryValuesIgnored, "clockOffset": A.clockOffset,
                "clockOffsetUncertainty": A.clockOffsetUncertainty, "clockReadingsIgnored": A.clockReadingsIgnored,
                "pointsOnDeviceClock": A.pointsOnDeviceClock,
            ],
            relayFields: [
                "requests": R.requests, "linesAccepted": R.linesAccepted, "linesRefused": R.linesRefused,
                "requestsThrottled": R.requestsThrottled, "linesForwarded": R.linesForwarded,
                "linesPending": R.linesPending, "clients": R.clients, "clientsEvicted": R.clientsEvicted,
            ],
            fieldTypes: Dictionary(
                uniqueKeysWithValues: measurements.values.map { name in
                    (name, (PointSchema.fieldTypes(of: name) ?? [:]).mapValues { "\($0)" })
                }
            ),
            lists: [
                "reservedTags": PointSchema.reservedTags.sorted(),
                "requestTags": PointSchema.requestTags, "requestFields": PointSchema.requestFields,
                "parseFailureTags": PointSchema.parseFailureTags, "parseFailureFields": PointSchema.parseFailureFields,
                "agentTags": PointSchema.agentTags, "agentFields": PointSchema.agentFields,
                "intervalTags": PointSchema.intervalTags, "intervalFields": PointSchema.intervalFields,
                "objectiveIntervalFields": PointSchema.objectiveIntervalFields,
                "transportErrorIntervalFields": PointSchema.transportErrorIntervalFields,
                "cacheIntervalFields": PointSchema.cacheIntervalFields,
                "relayTags": PointSchema.relayTags, "relayFields": PointSchema.relayFields,
                "relayLineRefusalReasons": R.lineRefusalReasons, "relayWriteRefusalReasons": R.writeRefusalReasons,
            ],
            cacheAgeBounds: PointSchema.IntervalField.cacheAgeBounds
        )
    }

    /// The description as JSON: keys sorted, two-space indented, a line end at the end (the bytes of
    /// `dashboards/schema.json`).
    package func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self) + "\n"
    }
}
