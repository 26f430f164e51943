import Logging

/// Says each kind of loss once at `warning` while the agent runs, and every loss in one warning at
/// shutdown: a library says a problem once, not per point.
final class LossReporter: Sendable {
    /// Losses already reported at warning, so each kind is said once.
    private struct Reported {
        /// Destinations whose backlog reached its cap.
        var droppedAtCap: Set<Int> = []
        /// A producer recorded after intake closed.
        var recordedAfterStop = false
        /// Requests went to the overflow series past the endpoint cap.
        var endpointsOverflowed = false
    }

    /// The destinations' names, by index, for the warnings.
    private let destinationNames: [String]
    private let logger: Logger
    /// Guards which losses were reported. A leaf of the lock order.
    private let reported = Locked(Reported())

    /// A reporter that has said nothing yet.
    ///
    /// - Parameters:
    ///   - configuration: The agent's settings, for its destinations' names.
    ///   - logger: Where to say it.
    init(configuration: APIHealthConfiguration, logger: Logger) {
        self.destinationNames = configuration.destinations.map(\.displayName)
        self.logger = logger
    }

    /// A point was not taken: if intake has closed, says once, at warning, that a producer still
    /// records into a stopped agent.
    ///
    /// - Parameter pending: The agent's batches.
    func noticeIfStopped(_ pending: PendingBatches) {
        guard pending.isClosed else { return }
        let first = reported.withLock { reported -> Bool in
            defer { reported.recordedAfterStop = true }
            return !reported.recordedAfterStop
        }
        guard first else { return }
        logger.warning(
            "APIHealth was stopped before a service that still records into it; its points are dropped. List the agent before the services that record into it in the ServiceGroup (it stops services in reverse order), so it stops after them",
            metadata: ["apihealth.points.dropped_after_stop": "\(pending.droppedAfterClose)"]
        )
    }

    /// Says once per destination, at warning, that its backlog reached its cap and points are dropped.
    ///
    /// - Parameter pending: The agent's batches.
    func reportDroppedAtCap(_ pending: PendingBatches) {
        let destinations = pending.currentMetrics.destinations
        for (index, destination) in destinations.enumerated() where destination.pointsDropped > 0 {
            guard reported.withLock({ $0.droppedAtCap.insert(index).inserted }) else { continue }
            logger.warning(
                "APIHealth is dropping points: the backlog for a destination reached its cap, so its oldest batches are dropped",
                metadata: [
                    "apihealth.destination": "\(name(of: index))",
                    "apihealth.points.dropped": "\(destination.pointsDropped)",
                    "apihealth.points.pending": "\(destination.pendingLines)",
                    "apihealth.error": "\(destination.lastError ?? "none")",
                ]
            )
        }
    }

    /// Says once, at warning, that endpoints came past the cap and their requests are counted in the
    /// overflow series.
    ///
    /// - Parameters:
    ///   - requests: Requests counted in the overflow series so far (nothing is said while it is 0).
    ///   - limit: The cap (``AggregationOptions/maximumEndpoints``).
    func reportEndpointOverflow(requests: UInt64, limit: Int) {
        guard requests > 0 else { return }
        let first = reported.withLock { reported -> Bool in
            defer { reported.endpointsOverflowed = true }
            return !reported.endpointsOverflowed
        }
        guard first else { return }
        logger.warning(
            "APIHealth reached its cap of distinct endpoints; the requests of further endpoints are counted in one overflow series (totals stay exact). Raise aggregation.maximumEndpoints (APIHEALTH_MAXIMUM_ENDPOINTS), or fold hosts and paths with capture.hostRules and capture.pathRules",
            metadata: [
                "apihealth.endpoints.limit": "\(limit)",
                "apihealth.requests.overflowed": "\(requests)",
            ]
        )
    }

    /// At shutdown, one warning with every loss counted since the start, if there was any.
    ///
    /// - Parameter pending: The agent's batches.
    func summarize(_ pending: PendingBatches) {
        let metrics = pending.currentMetrics
        let lost = metrics.pointsDropped + metrics.pointsLost + metrics.pointsRejected + metrics.pointsExpired
        guard lost > 0 else { return }
        var summary: Logger.Metadata = [
            "apihealth.points.recorded": "\(metrics.pointsRecorded)",
            "apihealth.points.dropped": "\(metrics.pointsDropped)",
            "apihealth.points.lost": "\(metrics.pointsLost)", "apihealth.points.rejected": "\(metrics.pointsRejected)",
            "apihealth.points.expired": "\(metrics.pointsExpired)",
            "apihealth.points.dropped_after_stop": "\(pending.droppedAfterClose)",
        ]
        for (index, destination) in metrics.destinations.enumerated() where destinationNames.indices.contains(index) {
            summary["apihealth.destination.\(destinationNames[index])"] =
                "written \(destination.pointsWritten), dropped \(destination.pointsDropped), rejected \(destination.pointsRejected), expired \(destination.pointsExpired), pending \(destination.pendingLines)"
        }
        logger.warning("APIHealth stopped; some points were not delivered", metadata: summary)
    }

    /// Says, at warning, that writing the spool failed (the spool reports each failure once).
    ///
    /// - Parameter failure: What failed.
    func spoolWriteFailed(_ failure: String) {
        logger.warning(
            "Writing to the spool failed; points stay in memory",
            metadata: ["apihealth.error": "\(failure)"]
        )
    }

    private func name(of index: Int) -> String {
        destinationNames.indices.contains(index) ? destinationNames[index] : "none"
    }
}
