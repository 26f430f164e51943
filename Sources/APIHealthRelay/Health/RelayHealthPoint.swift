@_spi(Package) import APIHealth
import LineProtocol

/// The relay's own health point, written through its agent beside the agent's `apihealth_agent` point
/// (which says what was forwarded and what is pending): its names, defined once, and the point.
package enum RelayHealthPoint {
    /// The measurement.
    package static let measurement = "apihealth_relay"

    /// Field names.
    package enum Field {
        package static let requests = "requests"
        package static let linesAccepted = "lines_accepted"
        package static let linesRefused = "lines_refused"
        package static let requestsThrottled = "requests_throttled"
        /// Refusals of one reason: `refused_<reason>` (``Refusal``'s raw value).
        package static func refused(_ reason: Refusal) -> String { "refused_\(reason.rawValue)" }
        /// Lines the agent has forwarded (a destination acknowledged them).
        package static let linesForwarded = "lines_forwarded"
        /// Lines not yet forwarded.
        package static let linesPending = "lines_pending"
        /// Client addresses whose rate is kept now.
        package static let clients = "clients"
        /// Clients that gave up their place in the table to newer ones.
        package static let clientsEvicted = "clients_evicted"
    }

    /// The point of `counters` and the agent's `metrics`, tagged as the agent tags its own.
    package static func point(
        _ counters: RelayCounters,
        clients: Int,
        clientsEvicted: UInt64,
        metrics: AgentMetrics,
        tags: [Point.Tag],
        at timestamp: Timestamp
    ) -> Point {
        var fields = [
            Point.Field(Field.requests, .uint(counters.requests)),
            Point.Field(Field.linesAccepted, .uint(counters.linesAccepted)),
            Point.Field(Field.linesRefused, .uint(counters.linesRefused)),
            Point.Field(Field.requestsThrottled, .uint(counters.requestsThrottled)),
        ]
        for reason in Refusal.allCases {
            fields.append(Point.Field(Field.refused(reason), .uint(counters.refused[reason] ?? 0)))
        }
        fields += [
            Point.Field(Field.linesForwarded, .uint(metrics.pointsWritten)),
            Point.Field(Field.linesPending, .uint(UInt64(max(0, metrics.pendingLines)))),
            Point.Field(Field.clients, .uint(UInt64(clients))),
            Point.Field(Field.clientsEvicted, .uint(clientsEvicted)),
        ]
        return Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp)
    }
}
