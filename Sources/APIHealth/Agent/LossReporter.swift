import Logging

/// The losses said at warning already, so that each kind is said once: kept by ``PendingBatches``
/// beside the counts that tell of them, under the same lock.
struct ReportedLosses {
    enum Loss: Hashable {
        /// A destination's backlog reached its cap.
        case droppedAtCap(Int)
        /// A producer recorded after intake closed.
        case recordedAfterStop
        /// Requests went to the overflow series past the endpoint cap.
        case endpointsOverflowed
    }

    private var reported: Set<Loss> = []

    /// Whether `loss` was not reported yet; it counts as reported from now on.
    mutating func firstTime(_ loss: Loss) -> Bool { reported.insert(loss).inserted }
}

/// Says each kind of loss once at `warning` while the agent runs, and every loss in one warning at
/// shutdown: a library says a problem once, not per point. Which were said is the batches' to keep
/// (``ReportedLosses``).
struct LossReporter: Sendable {
    /// The destinations' names, by index, for the warnings.
    private let destinationNames: [String]
    private let logger: Logger

    /// A reporter for the agent configured by `configuration`.
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
        guard pending.isFirstRefusalAfterClose() else { return }
        logger.warning(
            "APIHealth was stopped before a service that still records into it; its points are dropped. List the agent before the services that record into it in the ServiceGroup (it stops services in reverse order), so it stops after them",
            metadata: ["apihealth.points.dropped_after_stop": "\(pending.droppedAfterClose)"]
        )
    }

    /// Says once per destination, at warning, that its backlog reached its cap and points are dropped.
    ///
    /// - Parameter pending: The agent's batches.
    func reportDroppedAtCap(_ pending: PendingBatches) {
        for (index, destination) in pending.destinationsFirstDroppingAtCap() {
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
    /// overflow series (nothing while none is).
    ///
    /// - Parameters:
    ///   - pending: The agent's batches, which count the requests overflowed.
    ///   - limit: The cap (``AggregationOptions/maximumEndpoints``).
    func reportEndpointOverflow(_ pending: PendingBatches, limit: Int) {
        guard let requests = pending.firstEndpointOverflow() else { return }
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
