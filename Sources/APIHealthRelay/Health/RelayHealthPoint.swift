@_spi(Package) import APIHealth
import LineProtocol

/// The relay's own health point (``PointSchema/Measurement/relay``, its fields ``PointSchema/relayFields``),
/// written through its agent beside the agent's `apihealth_agent` point (which says what was forwarded and
/// what is pending).
package enum RelayHealthPoint {
    /// The point of `counters` and the agent's `metrics`, tagged as the agent tags its own.
    package static func point(
        _ counters: RelayCounters,
        clients: Int,
        clientsEvicted: UInt64,
        metrics: AgentMetrics,
        tags: [Point.Tag],
        at timestamp: Timestamp
    ) -> Point {
        typealias F = PointSchema.RelayField
        var fields = [
            Point.Field(F.requests, .uint(counters.requests)),
            Point.Field(F.linesAccepted, .uint(counters.linesAccepted)),
            Point.Field(F.linesRefused, .uint(counters.linesRefused)),
            Point.Field(F.requestsThrottled, .uint(counters.requestsThrottled)),
        ]
        for reason in Refusal.allCases {
            fields.append(Point.Field(F.refused(reason.rawValue), .uint(counters.refused[reason] ?? 0)))
        }
        fields += [
            Point.Field(F.linesForwarded, .uint(metrics.pointsWritten)),
            Point.Field(F.linesPending, .uint(UInt64(max(0, metrics.pendingLines)))),
            Point.Field(F.clients, .uint(UInt64(clients))),
            Point.Field(F.clientsEvicted, .uint(clientsEvicted)),
        ]
        return Point(measurement: PointSchema.Measurement.relay, tags: tags, fields: fields, timestamp: timestamp)
    }
}
