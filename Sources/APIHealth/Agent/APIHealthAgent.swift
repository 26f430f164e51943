import Foundation
import LineProtocol
import Logging
import ServiceLifecycle

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Watches the HTTP APIs a service calls and ships what it sees to InfluxDB.
///
/// ```swift
/// let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "checkout"), logger: logger)
/// let configuration = URLSessionConfiguration.default
/// agent.instrument(configuration, module: "payments")
/// let session = URLSession(configuration: configuration)
///
/// let group = ServiceGroup(services: [agent], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()   // ships until SIGTERM, then flushes what is pending
/// ```
///
/// Recording never waits for the network or the disk: a point is encoded into memory, written
/// through to the spool within a few milliseconds, and sent by a background loop. Captured requests
/// are encoded off the request's own path, by the loop that writes the spool (or by whatever reads
/// the agent's state first).
public final class APIHealthAgent: Sendable, Service {
    /// The settings the agent was made with.
    public let configuration: APIHealthConfiguration
    private let logger: Logger
    private let clock: any AgentClock
    private let schema: RequestSchema
    private let pending: PendingBatches
    /// One per destination (one that only seals batches when there is none).
    private let shippers: [Shipper]
    /// Where the agent is in its life.
    private struct Lifecycle {
        enum Phase { case idle, running, finished }
        /// Whether `run()` has started and ended.
        var phase = Phase.idle
        /// Cleared when shutdown begins.
        var intakeOpen = true
        /// Set once the last health point is recorded: after the final send, or when there is no more time.
        var lastHealthPointRecorded = false
        /// How long the loops may drain once shutdown has begun.
        var shutdownDeadline = Duration.seconds(10)
        /// The bodies to run when shutdown begins; `nil` once they have run.
        var shutdownHooks: [@Sendable () -> Void]? = []
    }
    /// Guards the agent's life cycle: its phase, intake, the shutdown deadline and hooks.
    private let lifecycle = Locked(Lifecycle())
    /// Yields once, when shutdown begins.
    private let shutdownBegan = AsyncStream<Void>.makeStream()
    private let runEnded = Latch()
    /// Requests the hook let through unrecorded.
    private let uncaptured = Locked<UInt64>(0)
    /// Metrics handlers a metrics backend sent to its overflow series (see ``countMetricsOverflowed()``).
    private let metricsOverflowed = Locked<UInt64>(0)
    /// Losses already reported at warning, so each kind is said once.
    private struct ReportedLosses {
        /// Destinations whose backlog reached its cap.
        var droppedAtCap: Set<Int> = []
        /// A producer recorded after intake closed.
        var recordedAfterStop = false
    }
    /// Guards which losses were reported.
    private let reportedLosses = Locked(ReportedLosses())
    /// Trace propagation, when configured.
    let traceInjection: TraceInjection?

    /// Makes an agent; nothing is sent until ``run()`` (or ``start()``).
    ///
    /// The spool directory is opened (and created if missing) here, and what an earlier run left in it
    /// is taken up to be sent first.
    ///
    /// - Parameters:
    ///   - configuration: Where to ship, how to batch and retry, what to capture.
    ///   - logger: Where the agent says where it ships, and any loss (at `info` and `warning`).
    ///   - clock: The agent's time; tests pass a manual clock.
    /// - Throws: ``APIHealthConfiguration/Error`` for bad settings, and ``SpoolError`` when the spool
    ///   directory cannot be used (another agent holds it, no permission, not a spool).
    public init(
        configuration: APIHealthConfiguration,
        logger: Logger,
        clock: any AgentClock = SystemAgentClock()
    ) throws {
        try configuration.validate()
        for notice in configuration.notices { logger.warning("APIHealth configuration: \(notice)") }
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.traceInjection = TraceInjection(configuration.capture.tracePropagation)
        let schema = RequestSchema(configuration: configuration)
        self.schema = schema
        var spool: SpoolDirectory?
        if configuration.isEnabled, let options = configuration.spool {
            spool = try SpoolDirectory(options: options, precision: configuration.precision)
        }
        var encoder = LineEncoder(precision: configuration.precision)
        // InfluxDB 1.x refuses unsigned fields: with a v1 destination among them, every destination gets integers.
        if configuration.writesUnsignedAsSigned {
            encoder.writesUnsignedAsSigned = true
        }
        let pending = PendingBatches(
            batching: configuration.batching,
            encoder: encoder,
            spool: spool,
            schema: schema,
            destinationCaps: configuration.destinations.isEmpty
                ? nil
                : configuration.destinations.map {
                    $0.maximumPendingBytes ?? configuration.batching.maximumPendingBytes
                }
        )
        self.pending = pending
        if let spool {
            let problems = try pending.restore(from: spool.reader())
            if let first = problems.first {
                logger.warning(
                    "Left parts of the spool out",
                    metadata: ["apihealth.spool.problems": "\(problems.count)", "apihealth.spool.problem": "\(first)"]
                )
            }
            for problem in problems.dropFirst() {
                logger.debug("Left a part of the spool out", metadata: ["apihealth.spool.problem": "\(problem)"])
            }
        }
        self.shippers = (0..<max(1, configuration.destinations.count)).map { index in
            Shipper(pending: pending, index: index, configuration: configuration, clock: clock, logger: logger)
        }
    }

    // MARK: Recording

    /// Records one request, through ``APIHealthConfiguration/CaptureOptions/filter`` when one is set
    /// (it sees no headers here). Safe from any thread; never blocks on I/O.
    ///
    /// - Parameter sample: What the request did.
    public func record(_ sample: RequestSample) {
        guard configuration.isEnabled else { return }
        if !pending.record(sample, request: SentRequest(), now: clock.coarseNow) { noticeIfStopped() }
    }

    /// Records the sample `request` builds, later: while the agent runs, its spool worker does it within
    /// ``SpoolOptions/writeThroughInterval`` (20 ms); in any case before the agent's metrics, pending
    /// lines, flushes or shutdown see what is pending; and the caller that queues the 512th waiting sample
    /// builds and encodes them all. For capture on the request's own path (AsyncHTTPClient's, whose
    /// observation of a request builds the sample), where building and encoding a sample would add to every
    /// request's time; queuing allocates nothing. Its `makeSample` returns `nil` to record nothing;
    /// `request` must not keep the agent alive (the queue is the agent's). Once shutdown has begun, the
    /// sample is dropped and counted at once.
    ///
    /// ```swift
    /// final class Observation: EndedRequestSource {
    ///     func makeSample(correlationHeaders: [String]) -> RequestSample? {
    ///         RequestSample(method: "GET", url: url, module: "billing", startedAt: start, duration: elapsed)
    ///     }
    /// }
    /// agent.recordLater(observation)
    /// ```
    package func recordLater(_ request: any EndedRequestSource) {
        guard configuration.isEnabled else { return }
        if !pending.deferRecord(now: clock.coarseNow, .request(request)) { noticeIfStopped() }
    }

    /// Records `sample` of `request` later, when and where the `recordLater` that takes an ended request
    /// does: for the URLSession hook, which ends a sample on the way to the app's completion.
    func recordLater(_ sample: RequestSample, request: URLRequest) {
        guard configuration.isEnabled else { return }
        if !pending.deferRecord(now: clock.coarseNow, .sample(sample, request)) { noticeIfStopped() }
    }

    /// Records any point through the same batches, spool and shipper (a metrics backend's, or your own).
    ///
    /// ```swift
    /// agent.write(Point(measurement: "queue_depth", tags: ["queue": "emails"], fields: ["depth": 42]))
    /// ```
    ///
    /// - Parameter point: The point, written with its own measurement, tags and fields (add
    ///   ``APIHealthConfiguration/everyPointTags`` for the `service`, `instance` and global tags).
    /// - Returns: `false` when the point was refused (it cannot be written as line protocol: see
    ///   `LineEncoder` in the LineProtocol module) or dropped; both are counted.
    @discardableResult
    public func write(_ point: Point) -> Bool {
        guard configuration.isEnabled else { return false }
        let accepted = pending.record(point, now: clock.coarseNow)
        if !accepted { noticeIfStopped() }
        return accepted
    }

    /// Records that a response could not be decoded, as a point of the parse-failure measurement.
    ///
    /// ```swift
    /// agent.recordParseFailure(for: request, response: response, error: error, module: "feed")
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request whose response it was (its URL and method name the endpoint).
    ///   - response: The response, for its status code and, when the request has none, its URL.
    ///   - error: What decoding threw; a `DecodingError` gives the ``ParseFailureKind`` and coding path.
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - data: The body, which tells a cut-off JSON document (``ParseFailureKind/dataCorrupted``) from a
    ///     body that is not JSON (``ParseFailureKind/notJSON``).
    public func recordParseFailure(
        for request: URLRequest,
        response: URLResponse?,
        error: any Error,
        module: String,
        data: Data? = nil
    ) {
        guard let url = request.url ?? response?.url else { return }
        recordParseFailure(
            method: request.httpMethod ?? "GET",
            url: url,
            statusCode: (response as? HTTPURLResponse)?.statusCode,
            error: error,
            module: module,
            data: data
        )
    }

    /// Records that the response of a request made with any HTTP client could not be decoded, as a point
    /// of the parse-failure measurement (tagged with the templated path, as the request's own point is).
    ///
    /// ```swift
    /// agent.recordParseFailure(method: "GET", url: url, statusCode: 200, error: error, module: "feed", data: body)
    /// ```
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - url: The request's URL (only its host and path are used).
    ///   - statusCode: The response's status, `nil` if there was none.
    ///   - error: What decoding threw (a `DecodingError` gives the kind and coding path).
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - data: The body that failed to decode: tells a document cut short from one that is not JSON.
    public func recordParseFailure(
        method: String,
        url: URL,
        statusCode: Int?,
        error: any Error,
        module: String,
        data: Data? = nil
    ) {
        guard configuration.isEnabled else { return }
        let (kind, codingPath) = ParseFailureKind.classify(error, data: data)
        let point = schema.parseFailurePoint(
            url: url,
            method: method,
            module: module,
            statusCode: statusCode,
            kind: kind,
            codingPath: codingPath,
            at: Date()
        )
        if let point { pending.record(point, now: clock.coarseNow) }
    }

    /// Decodes `data`; when that fails, records a parse failure for the endpoint and rethrows.
    ///
    /// ```swift
    /// let (data, response) = try await session.data(for: request)
    /// let user = try agent.decode(User.self, from: data, for: request, response: response, module: "accounts")
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: The response body.
    ///   - request: The request whose response it is.
    ///   - response: The response.
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - decoder: The decoder to use.
    /// - Returns: The decoded value.
    /// - Throws: Whatever `decoder` throws, after recording it.
    public func decode<T: Decodable>(
        _ type: T.Type,
        from data: Data,
        for request: URLRequest,
        response: URLResponse?,
        module: String,
        decoder: JSONDecoder = JSONDecoder()
    ) throws -> T {
        do {
            return try decoder.decode(type, from: data)
        } catch {
            recordParseFailure(for: request, response: response, error: error, module: module, data: data)
            throw error
        }
    }

    // MARK: URLSession

    /// Hooks every http(s) request made with sessions created from `configuration` afterwards.
    ///
    /// Requests behave exactly as without the hook: on Linux each one goes out once, from the app's
    /// own session (its delegate decides redirects and authentication as before); on Apple platforms
    /// it is re-issued on an inner session made from a copy of `configuration` as it is now, so set
    /// the configuration's other options first. Instrumenting the same configuration again, for the
    /// same agent and module, changes nothing; there is no limit on instrumented configurations.
    /// A configuration instrumented by an agent that is gone passes its requests through untouched.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.default
    /// configuration.timeoutIntervalForRequest = 10
    /// agent.instrument(configuration, module: "search")
    /// let session = URLSession(configuration: configuration)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: The configuration whose sessions' requests are recorded.
    ///   - module: The part of the service that makes these calls (the `module` tag).
    public func instrument(_ configuration: URLSessionConfiguration, module: String) {
        guard self.configuration.isEnabled else { return }
        let hook = CaptureRegistry.shared.hook(
            for: configuration,
            module: module,
            recorder: CaptureRecorder(agent: self),
            identity: self
        )
        configuration.protocolClasses =
            [hook] + (configuration.protocolClasses ?? []).filter { !($0 is InterceptingURLProtocol.Type) }
    }

    /// Hooks `configuration` as ``instrument(_:module:)`` does.
    ///
    /// - Parameters:
    ///   - configuration: The configuration whose sessions' requests are recorded.
    ///   - module: The part of the service that makes these calls (the `module` tag).
    ///   - streamsResponseBodies: Ignored: bodies pass through exactly as URLSession delivers them.
    @available(
        *,
        deprecated,
        message: "Bodies now pass through exactly as URLSession delivers them; use instrument(_:module:)"
    )
    public func instrument(_ configuration: URLSessionConfiguration, module: String, streamsResponseBodies: Bool) {
        instrument(configuration, module: module)
    }

    /// Counts a request the hook let through without recording it.
    func countUncaptured() {
        uncaptured.withLock { $0 += 1 }
    }

    /// Requests an instrumented session made that the hook let through unrecorded.
    var requestsUncaptured: UInt64 { uncaptured.withLock { $0 } }

    /// Counts a metrics handler that a metrics backend (APIHealthMetrics) sent to its shared overflow
    /// series because its cardinality cap was reached; shipped as `metrics_overflowed`.
    package func countMetricsOverflowed() {
        metricsOverflowed.withLock { $0 += 1 }
    }

    // MARK: Life cycle

    /// Why ``APIHealthAgent/run()`` refused to run.
    public struct LifecycleError: Swift.Error, Hashable, CustomStringConvertible {
        /// What kind of problem it is; new codes may be added.
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            private let name: String
            /// `run()` was called while it was running, or after it returned: an agent runs once.
            public static let alreadyRun = Code(name: "alreadyRun")
            public var description: String { name }
        }

        /// What kind of problem it is.
        public let code: Code
        public var description: String {
            switch code {
            case .alreadyRun: return "APIHealthAgent.run() was called a second time; an agent runs once"
            default: return "APIHealthAgent lifecycle error \(code)"
            }
        }
    }

    /// Ships until graceful shutdown (or task cancellation), then flushes what is pending within
    /// `APIHealthConfiguration.shutdownDeadline`; returns once the spool is released.
    ///
    /// Its loops run in a task group it awaits. An agent runs once: a second call throws
    /// ``LifecycleError`` with code ``LifecycleError/Code/alreadyRun``.
    ///
    /// - Throws: ``LifecycleError`` when called again.
    public func run() async throws {
        guard claimRun() else { throw LifecycleError(code: .alreadyRun) }
        await runClaimed()
    }

    /// Starts ``run()`` in the background, for processes that do not use a `ServiceGroup`; stop it
    /// with ``shutdown(deadline:)``. Does nothing if the agent already runs or has run.
    public func start() {
        guard claimRun() else { return }
        Task { await self.runClaimed() }
    }

    private func claimRun() -> Bool {
        lifecycle.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .running
            return true
        }
    }

    /// The agent's loops, each the one owner of its work.
    private enum Loop: Hashable {
        /// Sends sealed batches to one destination (``Shipper/run()``).
        case delivery(Int)
        /// Writes the spool and compresses waiting batches (``spoolLoop()``).
        case spool
        /// Records the agent's own health point every `selfMetricsInterval` (``selfMetricsLoop()``).
        case selfMetrics
        /// Records the interval points at the end of every interval (``aggregationLoop()``).
        case aggregation
        /// Ends the drain at the shutdown deadline.
        case shutdownDeadline
    }

    private func runClaimed() async {
        if configuration.isEnabled {
            logger.info(
                "APIHealth starts",
                metadata: [
                    "apihealth.destinations":
                        "\(configuration.destinations.isEmpty ? "none: lines stay in the spool" : configuration.destinations.map { "\($0.displayName) \($0.redactedURL)" }.joined(separator: "; "))",
                    "apihealth.spool":
                        "\(configuration.spool?.directory.path ?? "none: pending lines are kept in memory only")",
                ]
            )
        }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Loop.self) { group in
                for shipper in self.shippers {
                    group.addTask {
                        await shipper.run()
                        return .delivery(shipper.index)
                    }
                }
                group.addTask {
                    await self.spoolLoop()
                    return .spool
                }
                group.addTask {
                    await self.selfMetricsLoop()
                    return .selfMetrics
                }
                group.addTask {
                    await self.aggregationLoop()
                    return .aggregation
                }
                group.addTask {
                    // Bounds the drain: once shutdown has begun, the loops get until its deadline.
                    for await _ in self.shutdownBegan.stream { break }
                    if !Task.isCancelled { try? await Task.sleep(for: self.lifecycle.withLock { $0.shutdownDeadline }) }
                    return .shutdownDeadline
                }
                // Delivery and the spool end on their own once intake has closed and they are done.
                var draining = Set(self.shippers.map { Loop.delivery($0.index) } + [.spool])
                var lastRound = false
                while let ended = await group.next() {
                    draining.remove(ended)
                    if ended == .shutdownDeadline {
                        group.cancelAll()
                    } else if draining.isEmpty && !lastRound && !Task.isCancelled {
                        // Everything else went out: the last health point reports the final counts, and goes out too.
                        lastRound = true
                        self.recordLastHealthPoint()
                        for shipper in self.shippers {
                            draining.insert(.delivery(shipper.index))
                            group.addTask {
                                await shipper.run()
                                return .delivery(shipper.index)
                            }
                        }
                    } else if draining.isEmpty {
                        group.cancelAll()
                    }
                }
            }
        } onGracefulShutdown: {
            self.beginShutdown(deadline: self.configuration.shutdownDeadline)
        }
        // Out of time (or cancelled) before the last round: the last health point stays in the spool.
        recordLastHealthPoint()
        // Without a spool, what is pending is lost: releaseSpool says so at warning.
        if !pending.isDrained && !configuration.destinations.isEmpty && configuration.spool != nil {
            logger.info(
                "APIHealth stopped with lines pending; they stay in the spool",
                metadata: ["apihealth.pending.lines": "\(pending.currentMetrics.pendingLines)"]
            )
        }
        releaseSpool()
        reportLosses()
        summarizeLosses()
        lifecycle.withLock { $0.phase = .finished }
        runEnded.open()
    }

    /// Sends the open batch now.
    public func flush() {
        pending.sealOpenBatch()
    }

    /// Sends the open batch now and waits until nothing is pending, or `deadline` has passed.
    ///
    /// - Parameter deadline: How long to wait at most.
    /// - Returns: Whether everything was delivered (`false` also when there is no destination).
    @discardableResult
    public func flush(waitingUpTo deadline: Duration) async -> Bool {
        pending.sealOpenBatch()
        return await waitUntilDelivered(deadline: deadline)
    }

    /// Waits until nothing is pending (or nothing can be sent), or `deadline` has passed.
    private func waitUntilDelivered(deadline: Duration) async -> Bool {
        let end = ContinuousClock.now + deadline
        while true {
            let seen = pending.batchesLeft.generation
            if pending.isDrained || configuration.destinations.isEmpty { break }
            let left = end - ContinuousClock.now
            if left <= .zero || Task.isCancelled { break }
            await pending.batchesLeft.wait(after: seen, atMost: left)
        }
        return pending.isDrained
    }

    /// Stops intake and sends everything pending, including batches waiting to be retried, until
    /// `deadline` has passed; returns once ``run()`` has returned. What could not be sent stays in the
    /// spool for the next start.
    ///
    /// - Parameter deadline: How long to keep sending what is pending.
    public func shutdown(deadline: Duration = .seconds(10)) async {
        beginShutdown(deadline: deadline)
        let previous = lifecycle.withLock { state -> Lifecycle.Phase in
            let previous = state.phase
            if state.phase == .idle { state.phase = .finished }
            return previous
        }
        switch previous {
        case .idle:
            // Never ran: keep what is pending in the spool.
            recordLastHealthPoint()
            releaseSpool()
        case .running:
            await runEnded.wait()
        case .finished:
            break
        }
    }

    /// Runs `body` once when shutdown begins (``shutdown(deadline:)`` or graceful shutdown), before
    /// intake closes, so what it records is in the final flush. A metrics backend writes its last
    /// aggregates here.
    ///
    /// ```swift
    /// agent.onShutdown { aggregator.writePendingPoints() }
    /// ```
    ///
    /// Bodies run in the order they were added, on the thread that begins shutdown, and must not add
    /// another body. One added after shutdown has begun never runs.
    ///
    /// - Parameter body: What to do; it may call ``write(_:)``.
    public func onShutdown(_ body: @escaping @Sendable () -> Void) {
        lifecycle.withLock { state in state.shutdownHooks?.append(body) }
    }

    /// Closes intake (after the ``onShutdown(_:)`` bodies) and lets the loops drain until `deadline`.
    /// Idempotent. The last health point is recorded once the rest has gone out
    /// (``recordLastHealthPoint()``).
    private func beginShutdown(deadline: Duration) {
        // Held while the bodies run, so a concurrent call waits for their points before intake closes.
        let first = lifecycle.withLock { state -> Bool in
            for body in state.shutdownHooks ?? [] { body() }
            state.shutdownHooks = nil
            guard state.intakeOpen else { return false }
            state.intakeOpen = false
            state.shutdownDeadline = deadline
            pending.close { recordLastIntervals() }
            return true
        }
        guard first else { return }
        for shipper in shippers { shipper.startDraining() }
        shutdownBegan.continuation.yield()
        shutdownBegan.continuation.finish()
    }

    /// Writes what is left to the spool and lets go of it, warning once if points are lost.
    /// A point was not taken: if intake has closed, says once, at warning, that a producer still
    /// records into a stopped agent.
    private func noticeIfStopped() {
        guard pending.isClosed else { return }
        let first = reportedLosses.withLock { reported -> Bool in
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
    private func reportLosses() {
        let destinations = pending.currentMetrics.destinations
        for (index, destination) in destinations.enumerated() where destination.pointsDropped > 0 {
            guard reportedLosses.withLock({ $0.droppedAtCap.insert(index).inserted }) else { continue }
            logger.warning(
                "APIHealth is dropping points: the backlog for a destination reached its cap, so its oldest batches are dropped",
                metadata: [
                    "apihealth.destination":
                        "\(configuration.destinations.indices.contains(index) ? configuration.destinations[index].displayName : "none")",
                    "apihealth.points.dropped": "\(destination.pointsDropped)",
                    "apihealth.points.pending": "\(destination.pendingLines)",
                    "apihealth.error": "\(destination.lastError ?? "none")",
                ]
            )
        }
    }

    /// At shutdown, one warning with every loss counted since the start, if there was any.
    private func summarizeLosses() {
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
        for (index, destination) in metrics.destinations.enumerated()
        where configuration.destinations.indices.contains(index) {
            summary["apihealth.destination.\(configuration.destinations[index].displayName)"] =
                "written \(destination.pointsWritten), dropped \(destination.pointsDropped), rejected \(destination.pointsRejected), expired \(destination.pointsExpired), pending \(destination.pendingLines)"
        }
        logger.warning("APIHealth stopped; some points were not delivered", metadata: summary)
    }

    private func releaseSpool() {
        let lost = pending.releaseSpool { [logger] failure in
            logger.warning(
                "Writing to the spool failed; points stay in memory",
                metadata: ["apihealth.error": "\(failure)"]
            )
        }
        if lost > 0 {
            logger.warning(
                configuration.spool == nil
                    ? "APIHealth exits with points it could not deliver; without a spool they are lost"
                    : "APIHealth exits with points that are neither delivered nor in the spool",
                metadata: [
                    "apihealth.points.lost": "\(lost)", "apihealth.spool.errors": "\(pending.metrics.spoolWriteErrors)",
                ]
            )
        }
    }

    /// What happened to the points so far.
    public var metrics: AgentMetrics {
        var metrics = pending.metrics
        metrics.requestsUncaptured = requestsUncaptured
        metrics.metricsOverflowed = metricsOverflowed.withLock { $0 }
        metrics.intervalPoints = schema.aggregator?.pointsTaken ?? 0
        metrics.requestsOnlyAggregated = schema.aggregator?.requestsOnlyAggregated ?? 0
        return metrics
    }

    // MARK: Internals

    /// Records the agent's own health point every `selfMetricsInterval` while intake is open.
    private func selfMetricsLoop() async {
        guard configuration.isEnabled else { return }
        while !Task.isCancelled {
            do {
                try await clock.sleep(until: clock.now + configuration.selfMetricsInterval)
            } catch {
                return
            }
            let intakeOpen = lifecycle.withLock { state -> Bool in
                // Under the lock, so no health point follows the last one shutdown records.
                if state.intakeOpen { pending.record(selfMetricsPoint(), now: clock.coarseNow) }
                return state.intakeOpen
            }
            if !intakeOpen { return }
        }
    }

    /// Records the interval points at the end of every interval of ``AggregationOptions/interval``
    /// (whole multiples of it since the Unix epoch, so replicas' intervals line up) while intake is open.
    private func aggregationLoop() async {
        guard configuration.isEnabled, let aggregation = configuration.aggregation else { return }
        let interval = RequestSchema.wholeNanoseconds(aggregation.interval) ?? Int64.max / 2
        while !Task.isCancelled {
            let now = Self.nanosecondsSinceEpoch(Date())
            let end = (now / interval + 1) * interval
            do {
                try await clock.sleep(until: clock.now + .nanoseconds(end - now))
            } catch {
                return
            }
            if !recordIntervalPoints(endingAt: Timestamp(nanosecondsSinceEpoch: end)) { return }
        }
    }

    /// Records one point per endpoint that saw requests since the last interval, stamped `end`. Returns
    /// `false` once intake has closed (the last ones are recorded when it closes). The aggregation loop
    /// calls it at the end of every interval.
    @discardableResult
    @_spi(Benchmarking) public func recordIntervalPoints(endingAt end: Timestamp) -> Bool {
        guard let aggregator = schema.aggregator else { return false }
        return lifecycle.withLock { state -> Bool in
            // Under the lock, so the last interval points (taken when intake closes) come after these.
            guard state.intakeOpen else { return false }
            for point in aggregator.takePoints(at: end) { pending.record(point, now: clock.coarseNow) }
            return true
        }
    }

    /// The interval points of the interval shutdown cuts short, stamped now (never an interval's end, which
    /// a restarted replica of the same name writes for the interval it starts in).
    private func recordLastIntervals() {
        guard configuration.isEnabled, let aggregator = schema.aggregator else { return }
        let unit = configuration.precision.nanosecondsPerUnit
        var now = Self.nanosecondsSinceEpoch(Date()) / unit * unit
        let interval = RequestSchema.wholeNanoseconds(aggregator.options.interval) ?? Int64.max
        if now % interval == 0 { now -= unit }
        for point in aggregator.takePoints(at: Timestamp(nanosecondsSinceEpoch: now), closing: true) {
            pending.record(point, now: clock.coarseNow)
        }
    }

    private static func nanosecondsSinceEpoch(_ date: Date) -> Int64 {
        let timestamp = Timestamp(date: date)
        return timestamp.seconds * 1_000_000_000 + timestamp.nanoseconds
    }

    /// Records the agent's last health point once, after intake has closed: when everything before it
    /// was sent (so it reports the final counts, and is sent itself), or when the drain ends without
    /// that (it stays in the spool). Nothing for a disabled agent.
    private func recordLastHealthPoint() {
        guard configuration.isEnabled, pending.isClosed else { return }
        let first = lifecycle.withLock { state -> Bool in
            defer { state.lastHealthPointRecorded = true }
            return !state.lastHealthPointRecorded
        }
        if first { pending.recordAfterClose(selfMetricsPoint(), now: clock.now) }
    }

    /// The agent's health point now, from its counters as they are.
    private func selfMetricsPoint() -> Point {
        var metrics = pending.currentMetrics
        metrics.requestsUncaptured = requestsUncaptured
        metrics.metricsOverflowed = metricsOverflowed.withLock { $0 }
        metrics.intervalPoints = schema.aggregator?.pointsTaken ?? 0
        metrics.requestsOnlyAggregated = schema.aggregator?.requestsOnlyAggregated ?? 0
        return Self.selfMetricsPoint(metrics, schema: schema, configuration: configuration)
    }

    /// The spool worker: writes what is recorded through to the spool every
    /// ``SpoolOptions/writeThroughInterval`` (at once for a full batch), removes the files of batches that
    /// are gone, and compresses the batches waiting to be sent.
    private func spoolLoop() async {
        while !Task.isCancelled {
            pending.writeThrough { [logger] failure in
                logger.warning(
                    "Writing to the spool failed; points stay in memory",
                    metadata: ["apihealth.error": "\(failure)"]
                )
            }
            // Every destination gets the same body: the first shipper makes them.
            shippers[0].makeWaitingBodies()
            reportLosses()
            // Intake is closed: nothing new can arrive, so one last write-through (below) keeps the rest.
            if pending.isClosed { break }
            await pending.filled.wait(atMost: writeThroughInterval)
        }
        pending.writeThrough { _ in }
    }

    /// How often the spool worker runs: the spool's setting, or its default without a spool.
    private var writeThroughInterval: Duration {
        configuration.spool?.writeThroughInterval ?? SpoolOptions.defaultWriteThroughInterval
    }

    static func selfMetricsPoint(
        _ metrics: AgentMetrics,
        schema: RequestSchema,
        configuration: APIHealthConfiguration
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
            Point.Field(F.pathsOverflowed, .uint(schema.pathsOverflowed)),
            Point.Field(F.requestsUncaptured, .uint(metrics.requestsUncaptured)),
            Point.Field(F.pointsLost, .uint(metrics.pointsLost)),
            Point.Field(F.metricsOverflowed, .uint(metrics.metricsOverflowed)),
            Point.Field(F.intervalPoints, .uint(metrics.intervalPoints)),
            Point.Field(F.requestsOnlyAggregated, .uint(metrics.requestsOnlyAggregated)),
            Point.Field(F.requestsFiltered, .uint(metrics.requestsFiltered)),
        ]
        if let error = metrics.lastError {
            // On one line (a server's message often ends in a line break): the encoder has nothing to
            // repair in the agent's own text, so `points_repaired` counts only the data it was given.
            let oneLine = error.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }.joined(separator: " ")
            fields.append(Point.Field(F.lastError, .string(String(oneLine.prefix(1_000)))))
        }
        return Point(
            measurement: configuration.agentMeasurement,
            tags: schema.everyPointTags,
            fields: fields,
            timestamp: Timestamp(date: Date())
        )
    }
}

/// The hook's view of an agent (weak, so a registered configuration does not keep the agent alive).
final class CaptureRecorder: SampleRecorder, @unchecked Sendable {
    private weak var agent: APIHealthAgent?
    let correlationHeaders: [String]

    init(agent: APIHealthAgent) {
        self.agent = agent
        self.correlationHeaders = agent.configuration.capture.correlationHeadersInOrder
    }

    var isAlive: Bool { agent != nil }
    var owner: AnyObject? { agent }
    func countUncaptured() { agent?.countUncaptured() }
    var isCapturing: Bool { agent?.configuration.isEnabled ?? false }
    func isExcluded(_ url: URL) -> Bool { agent?.isExcluded(url) ?? true }
    func record(_ sample: RequestSample, request: URLRequest) { agent?.recordLater(sample, request: request) }
}

extension APIHealthAgent {
    func isExcluded(_ url: URL) -> Bool { schema.isExcluded(url) }

    /// Every pending point, parsed back (for tests and diagnostics).
    func pendingPoints() -> [Point] {
        (try? LineParser(precision: configuration.precision).parse(pending.pendingBytes())) ?? []
    }
}
