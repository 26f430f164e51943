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
/// through to the spool within a few milliseconds, and sent by a background loop. Requests are encoded
/// off the caller's path, by the agent's record loop, a thread of its own.
public final class APIHealthAgent: Sendable, Service {
    /// The settings the agent was made with.
    public let configuration: APIHealthConfiguration
    let logger: Logger
    let clock: any AgentClock
    let schema: RequestSchema
    /// The batches of every destination, and the spool behind them.
    let pending: PendingBatches
    /// Records captured requests (filter, series, aggregate, line), at once or from its queue.
    let recorder: RequestRecorder
    /// One per destination (one that only seals batches when there is none).
    let shippers: [Shipper]
    /// Writes recorded lines through to the spool and compresses the batches waiting to be sent.
    let spoolWorker: SpoolWorker
    /// Ends every interval: the interval points, the health point and a metrics backend's points.
    let intervalClock: IntervalClock
    /// Says each kind of loss once at warning, and sums them up at shutdown.
    let lossReporter: LossReporter
    /// Corrects the device's clock from `Date` headers (``APIHealthConfiguration/correctsClock``); `nil` when off.
    let clockCorrection: ClockCorrection?
    /// Where the agent is in its life.
    struct Lifecycle {
        enum Phase { case idle, running, finished }
        /// Whether `run()` has started and ended.
        var phase = Phase.idle
        /// Cleared when shutdown begins.
        var intakeOpen = true
        /// Set once the last health point is recorded: after the final send, or when there is no more time.
        var lastHealthPointRecorded = false
        /// How long the loops may drain once shutdown has begun.
        var shutdownDeadline = APIHealthConfiguration.defaultShutdownDeadline
        /// The bodies to run when shutdown begins; `nil` once they have run.
        var shutdownHooks: [@Sendable () -> Void]? = []
        /// Who is handed each interval's points (``observeIntervalPoints(_:)``), the last ones included.
        var intervalObservers: [@Sendable ([Point]) -> Void] = []
        /// The milestones passed, and the tasks waiting for one (``APIHealthAgent/wait(for:)``).
        var passed: Set<Milestone> = []
        var waiters: [(milestone: Milestone, continuation: CheckedContinuation<Void, Never>)] = []

        /// What `shutdown(deadline:)` waits for.
        enum Milestone: Hashable {
            /// Intake has closed and the last interval points are recorded.
            case intakeClosed
            /// `run()` has ended.
            case runEnded
        }

        /// Keeps `continuation` until `milestone` is passed; `false` if it is already (resume it now).
        mutating func wait(for milestone: Milestone, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
            if passed.contains(milestone) { return false }
            waiters.append((milestone, continuation))
            return true
        }

        /// `milestone` is passed: returns the continuations of those waiting for it, to resume.
        mutating func pass(_ milestone: Milestone) -> [CheckedContinuation<Void, Never>] {
            passed.insert(milestone)
            defer { waiters.removeAll { $0.milestone == milestone } }
            return waiters.filter { $0.milestone == milestone }.map(\.continuation)
        }
    }
    /// Guards the agent's life cycle: its phase, intake, the shutdown deadline and hooks, who waits for a
    /// milestone, and who is handed interval points. The first of the agent's locks: the health point and
    /// a metrics backend's interval tick are recorded under it, and intake is marked closed under it, so
    /// neither follows the last ones. The `onShutdown` bodies and the capture filter never run under it.
    /// Every lock and its level: the article "How a request becomes a line".
    let lifecycle = Locked(Lifecycle())
    /// Yields once, when shutdown begins.
    let shutdownBegan = AsyncStream<Void>.makeStream()
    /// Trace propagation, when configured.
    let traceInjection: TraceInjection?
    /// Whether trace propagation is configured (and the agent enabled): read on every AsyncHTTPClient request.
    package let propagatesTraces: Bool
    /// Whether the agent gives cache advice (``APIHealthConfiguration/CaptureOptions/cacheAdvice``, and the
    /// agent enabled): capture then digests each response body as it streams (``BodyDigest``) and hands
    /// the agent its ``CacheEvidence``; without it, no byte of a body is read.
    package let digestsBodies: Bool
    /// The GraphQL paths (``APIHealthConfiguration/CaptureOptions/graphQLPaths``), `nil` when none: a client's
    /// capture reads a request's operation, on its own path, only for a request to one of them.
    package let graphQL: GraphQLEndpoints?

    /// Makes an agent; nothing is sent until ``run()`` (or ``start()``).
    ///
    /// The spool directory is opened (and created if missing) here, and what an earlier run left in it
    /// is taken up to be sent first.
    ///
    /// ```swift
    /// let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "checkout"), logger: logger)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: Where to ship, how to batch and retry, what to capture.
    ///   - logger: Where the agent says where it ships, and any loss (at `info` and `warning`).
    /// - Throws: ``APIHealthConfiguration/Error`` for bad settings, and ``SpoolError`` when the spool
    ///   directory cannot be used (another agent holds it, no permission, not a spool).
    public convenience init(configuration: APIHealthConfiguration, logger: Logger) throws {
        try self.init(configuration: configuration, logger: logger, clock: SystemAgentClock())
    }

    /// Makes an agent on `clock`, whose spool worker's beat is measured on `spoolClock` (the package's
    /// tests pass manual ones).
    package init(
        configuration: APIHealthConfiguration,
        logger: Logger,
        clock: any AgentClock,
        spoolClock: any AgentClock = SystemAgentClock()
    ) throws {
        try configuration.validate()
        for notice in configuration.notices { logger.warning("APIHealth configuration: \(notice)") }
        if configuration.isEnabled, configuration.instance.isEmpty, configuration.precision != .ns {
            logger.warning(
                "APIHealth configuration: without an instance tag, installs share their series; at precision \(configuration.precision.rawValue) their interval points overwrite one another in InfluxDB (see Timestamps): keep ns"
            )
        }
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        let clockCorrection = configuration.correctsClock ? ClockCorrection(clock: clock) : nil
        self.clockCorrection = clockCorrection
        self.traceInjection = TraceInjection(configuration.capture.tracePropagation)
        self.propagatesTraces = traceInjection != nil && configuration.isEnabled
        let digestsBodies = configuration.capture.cacheAdvice && configuration.isEnabled
        self.digestsBodies = digestsBodies
        var spool: SpoolDirectory?
        if configuration.isEnabled, let options = configuration.spool {
            spool = try SpoolDirectory(options: options, precision: configuration.precision)
        }
        let learnsCountry = configuration.capture.countryHeader != nil
        let schema = RequestSchema(
            configuration: configuration,
            logger: logger,
            learnedCountry: learnsCountry ? spool?.learnedCountry() : nil
        )
        self.schema = schema
        self.graphQL = schema.graphQL
        var encoder = LineEncoder(precision: configuration.precision)
        // InfluxDB 1.x refuses unsigned fields: with a v1 destination among them, every destination gets integers.
        if configuration.writesUnsignedAsSigned {
            encoder.writesUnsignedAsSigned = true
        }
        let pending = PendingBatches(
            batching: configuration.batching,
            encoder: encoder,
            spool: spool,
            compressor: BatchCompressor(configuration: configuration),
            destinationCaps: configuration.destinations.isEmpty
                ? nil
                : configuration.destinations.map {
                    $0.maximumPendingBytes ?? configuration.batching.maximumPendingBytes
                }
        )
        self.pending = pending
        // Once readings agree, the lines still pending that were stamped on the device's clock move to true time.
        clockCorrection?.whenOffsetLearned { nanoseconds in pending.offsetLearned(nanoseconds: nanoseconds) }
        let recorder = RequestRecorder(
            schema: schema,
            pending: pending,
            clockCorrection: clockCorrection,
            clock: clock,
            cacheAdvisor: digestsBodies ? CacheAdvisor() : nil
        )
        self.recorder = recorder
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
            Shipper(
                pending: pending,
                destination: DestinationID(index: index),
                configuration: configuration,
                clock: clock,
                clockCorrection: clockCorrection,
                logger: logger,
                beforeSealing: { recorder.catchUp() }
            )
        }
        let lossReporter = LossReporter(configuration: configuration, logger: logger)
        self.lossReporter = lossReporter
        self.spoolWorker = SpoolWorker(
            pending: pending,
            recorder: recorder,
            compressesBatches: !configuration.destinations.isEmpty,
            lossReporter: lossReporter,
            writeThroughInterval: configuration.spool?.writeThroughInterval ?? SpoolOptions.defaultWriteThroughInterval,
            clock: spoolClock,
            countryFile: learnsCountry ? spool : nil
        )
        self.intervalClock = IntervalClock(clock: clock, correction: clockCorrection)
        scheduleIntervalWork()
    }

    // MARK: Recording

    /// The time the agent stamps points with: the device's clock, corrected from the `Date` headers it
    /// sees when ``APIHealthConfiguration/correctsClock`` is on. Start a sample you give ``record(_:)`` at
    /// it, so the sample is stamped as captured requests are.
    ///
    /// ```swift
    /// let started = agent.now
    /// ```
    public var now: Date {
        let timestamp = nowTimestamp
        return Date(timeIntervalSince1970: Double(timestamp.seconds) + Double(timestamp.nanoseconds) / 1e9)
    }

    /// ``now`` to the nanosecond.
    package var nowTimestamp: Timestamp { clockCorrection?.now ?? clock.wallNow }

    /// Records one request, through ``APIHealthConfiguration/CaptureOptions/filter`` when one is set
    /// (it sees no headers here). Safe from any thread; never blocks on I/O: the sample is queued, and the
    /// agent's record loop records it, as it does captured requests (``metrics``, ``flush()`` and shutdown
    /// see it).
    ///
    /// ```swift
    /// agent.record(RequestSample(method: "GET", url: url, module: "billing", startedAt: started,
    ///                            duration: elapsed, statusCode: 200))
    /// ```
    ///
    /// - Parameter sample: What the request did.
    public func record(_ sample: consuming RequestSample) {
        guard configuration.isEnabled else { return }
        if !recorder.recordLater(now: clock.coarseNow, recorded: sample) {
            lossReporter.noticeIfStopped(pending)
        }
    }

    /// Records the sample `request` builds, later: the agent's record loop does it within 20 ms
    /// (``RecordIntake/roundInterval``), and in any case before the agent's metrics, pending lines, flushes
    /// or shutdown see what is pending. For capture on the request's own path (AsyncHTTPClient's, whose
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
        if !recorder.recordLater(now: clock.coarseNow, .request(request)) { lossReporter.noticeIfStopped(pending) }
    }

    /// Records `sample` of `request` later, when and where the `recordLater` that takes an ended request
    /// does: for the URLSession hook, which ends a sample on the way to the app's completion.
    func recordLater(_ sample: RequestSample, request: URLRequest, cacheEvidence: CacheEvidence? = nil) {
        guard configuration.isEnabled else { return }
        if !recorder.recordLater(now: clock.coarseNow, .sample(sample, request, cacheEvidence)) {
            lossReporter.noticeIfStopped(pending)
        }
    }

    /// Hands the country header's `value`, read from a response as it arrives, to the record loop's
    /// learner (the Apple platforms' hook, whose samples come without their response's headers).
    func observeCountryHeader(_ value: String) {
        guard configuration.isEnabled else { return }
        // Once intake has closed there is nothing left to tag: the value is let go.
        _ = recorder.intake.enqueue(DeferredSample(now: clock.coarseNow, source: .countryHeader(value)))
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
        if !accepted { lossReporter.noticeIfStopped(pending) }
        return accepted
    }

    /// Records `point` as ``write(_:)`` does; with `keepingTimestamp`, its timestamp is written as it is,
    /// never moved off an instant its series has used: for a relay forwarding installs' points, whose
    /// retried copies must land on the same instant so that the server keeps one.
    @discardableResult
    package func write(_ point: Point, keepingTimestamp: Bool) -> Bool {
        guard configuration.isEnabled else { return false }
        let accepted = pending.record(point, now: clock.coarseNow, keepsTimestamp: keepingTimestamp)
        if !accepted { lossReporter.noticeIfStopped(pending) }
        return accepted
    }

    /// Records one line already written as line protocol (`\n` included, in ``APIHealthConfiguration/precision``
    /// and, for a destination that takes no unsigned values, without them), as it is: for a relay forwarding
    /// the lines it checked, its timestamp kept as ``write(_:keepingTimestamp:)`` keeps one.
    @discardableResult
    package func write(line: UnsafeBufferPointer<UInt8>) -> Bool {
        guard configuration.isEnabled else { return false }
        let accepted = pending.record(line: line, now: clock.coarseNow)
        if !accepted { lossReporter.noticeIfStopped(pending) }
        return accepted
    }

    /// Returns once what was recorded before the call is written through to the spool: for a relay that
    /// acknowledges a write only once its lines are on disk. At once without a spool.
    ///
    /// Spool rounds are the spool worker's: while the agent runs, this asks the worker for a round and
    /// waits for it (or, once the worker's loop has ended, for `run()` to end: it writes the rest as it
    /// releases the spool). Before the agent starts there is no worker: the caller runs the round itself,
    /// under the life cycle's lock, so the worker cannot start beside it.
    package func writeThrough() async {
        guard pending.worker.spool != nil else { return }
        var failure: String?
        let phase = lifecycle.withLock { state -> Lifecycle.Phase in
            if state.phase == .idle { pending.writeThrough { failure = $0 } }
            return state.phase
        }
        if let failure { lossReporter.spoolWriteFailed(failure) }
        guard phase == .running, await !spoolWorker.writtenThrough() else { return }
        await wait(for: .runEnded)
    }

    /// Counts a metrics handler that a metrics backend (APIHealthMetrics) sent to its shared overflow
    /// series because its cardinality cap was reached; shipped as `metrics_overflowed`.
    package func countMetricsOverflowed() {
        pending.count(.counted(\.metricsOverflowed))
    }

    /// What happened to the points so far.
    public var metrics: AgentMetrics {
        recorder.catchUp()
        return completed(pending.currentMetrics)
    }

    /// `metrics` with the counts kept outside the batches: the country header's values ignored, the
    /// device's clock.
    func completed(_ batchMetrics: AgentMetrics) -> AgentMetrics {
        var metrics = batchMetrics
        metrics.countryValuesIgnored = pending.publishedCountry?.ignored ?? 0
        metrics.clockOffset = clockCorrection?.offset
        metrics.clockOffsetUncertainty = clockCorrection?.uncertainty
        metrics.clockReadingsIgnored = clockCorrection?.ignoredReadings ?? 0
        // Until an offset is known, every point recorded carries the device's time.
        if let clockCorrection, clockCorrection.offset == nil { metrics.pointsOnDeviceClock = metrics.pointsRecorded }
        // The aggregates' counts are the record loop's, published with the batches' counters.
        if let aggregator = schema.aggregator { metrics.endpointLimit = aggregator.options.maximumEndpoints }
        return metrics
    }
}

extension APIHealthAgent {
    func isExcluded(_ url: URL) -> Bool { schema.isExcluded(url) }

    /// Nothing is pending: no batch, and no captured request waiting to be recorded.
    var isDrained: Bool { recorder.intake.isEmpty && pending.isDrained }

    /// Every pending point, parsed back (for tests and diagnostics).
    func pendingPoints() -> [Point] {
        recorder.catchUp()
        return (try? LineParser(precision: configuration.precision).parse(pending.pendingBytes())) ?? []
    }
}
