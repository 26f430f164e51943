import Foundation
import LineProtocol

/// The agent's own health point (``PointSchema/Measurement/agent``): its counters as they are, every
/// ``APIHealthConfiguration/selfMetricsInterval`` and once more at shutdown.
enum AgentHealthPoint {
    static func make(
        _ metrics: AgentMetrics,
        tags: [Point.Tag],
        configuration: APIHealthConfiguration,
        at timestamp: Timestamp = .systemNow()
    ) -> Point {
        typealias F = PointSchema.AgentField
        var fields: [Point.Field] = [
            Point.Field(F.pointsRecorded, .uint(metrics.pointsRecorded)),
            Point.Field(F.pointsInvalid, .uint(metrics.pointsInvalid)),
            Point.Field(F.pointsRepaired, .uint(metrics.pointsRepaired)),
            Point.Field(F.pointsWritten, .uint(metrics.pointsWritten)),
            Point.Field(F.pointsDropped, .uint(metrics.pointsDropped)),
            Point.Field(F.pointsRejected, .uint(metrics.pointsRejected)),
            Point.Field(F.pointsExpired, .uint(metrics.pointsExpired)), Point.Field(F.retries, .uint(metrics.retries)),
            Point.Field(F.batchesWritten, .uint(metrics.batchesWritten)),
            Point.Field(F.bytesBeforeGzip, .uint(metrics.bytesBeforeGzip)),
            Point.Field(F.bytesAfterGzip, .uint(metrics.bytesAfterGzip)),
            Point.Field(F.pendingLines, .uint(UInt64(metrics.pendingLines))),
            Point.Field(F.pendingBytes, .uint(UInt64(metrics.pendingBytes))),
            Point.Field(F.pathsOverflowed, .uint(metrics.pathsOverflowed)),
            Point.Field(F.requestsUncaptured, .uint(metrics.requestsUncaptured)),
            Point.Field(F.pointsLost, .uint(metrics.pointsLost)),
            Point.Field(F.metricsOverflowed, .uint(metrics.metricsOverflowed)),
            Point.Field(F.intervalPoints, .uint(metrics.intervalPoints)),
            Point.Field(F.requestsOnlyAggregated, .uint(metrics.requestsOnlyAggregated)),
            Point.Field(F.requestsFiltered, .uint(metrics.requestsFiltered)),
            Point.Field(F.endpointLimit, .uint(UInt64(max(metrics.endpointLimit, 0)))),
            Point.Field(F.endpoints, .uint(UInt64(max(metrics.endpoints, 0)))),
            Point.Field(F.requestsOverflowed, .uint(metrics.requestsOverflowed)),
            Point.Field(F.endpointsEvicted, .uint(metrics.endpointsEvicted)),
            Point.Field(F.countryValuesIgnored, .uint(metrics.countryValuesIgnored)),
        ]
        if configuration.capture.cacheAdvice {
            fields.append(Point.Field(F.cacheKeysEvicted, .uint(metrics.cacheKeysEvicted)))
        }
        if configuration.correctsClock {
            fields.append(Point.Field(F.clockReadingsIgnored, .uint(metrics.clockReadingsIgnored)))
            fields.append(Point.Field(F.pointsOnDeviceClock, .uint(metrics.pointsOnDeviceClock)))
            if let offset = metrics.clockOffset {
                fields.append(Point.Field(F.clockOffset, .float(offset.milliseconds)))
            }
            if let uncertainty = metrics.clockOffsetUncertainty {
                fields.append(Point.Field(F.clockOffsetUncertainty, .float(uncertainty.milliseconds)))
            }
        }
        if let error = metrics.lastError {
            // On one line (a server's message often ends in a line break): the encoder has nothing to
            // repair in the agent's own text, so `points_repaired` counts only the data it was given.
            let oneLine = error.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }.joined(separator: " ")
            fields.append(Point.Field(F.lastError, .string(String(oneLine.prefix(1_000)))))
        }
        return Point(
            measurement: configuration.agentMeasurement,
            tags: tags,
            fields: fields,
            timestamp: timestamp
        )
    }
}
