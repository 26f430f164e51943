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
/// through to the spool within a few milliseconds, and sent by a background loop.
public final class APIHealthAgent: Sendable, Service {
    public let configuration: APIHealthConfiguration
    private let logger: Logger
    private let clock: any AgentClock
    private let schema: RequestSchema
    private let pending: PendingBatches
    private let shipper: Shipper
    private let correlationHeaderNames: [String]
    /// The loops started by `run()`, so that shutdown can stop them at its deadline.
    private let loops = Locked<Task<Void, Never>?>(nil)
    private let stopped = Locked(false)

    /// Makes an agent; nothing is sent until ``run()`` (or ``start()``).
    ///
    /// Throws ``APIHealthConfiguration/Error`` for bad settings and ``SpoolError`` when the spool
    /// directory cannot be used (another agent holds it, no permission).
    public init(configuration: APIHealthConfiguration, logger: Logger, clock: any AgentClock = SystemAgentClock()) throws {
        try configuration.validate()
        for notice in configuration.notices { logger.warning("APIHealth configuration: \(notice)") }
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.schema = RequestSchema(configuration: configuration)
        self.correlationHeaderNames = configuration.capture.correlationHeaders
        var spool: SpoolDirectory?
        if configuration.isEnabled, let options = configuration.spool {
            spool = try SpoolDirectory(options: options, precision: configuration.precision)
        }
        var encoder = LineEncoder(precision: configuration.precision)
        if case .v1 = configuration.destination?.api { encoder.writesUnsignedAsSigned = true }
        let pending = PendingBatches(batching: configuration.batching, encoder: encoder, spool: spool)
        self.pending = pending
        if let spool {
            let problems = try pending.restore(from: spool.reader())
            if let first = problems.first {
                logger.warning(
                    "Left parts of the spool out", metadata: ["apihealth.spool.problems": "\(problems.count)", "apihealth.spool.problem": "\(first)"])
            }
            for problem in problems.dropFirst() {
                logger.debug("Left a part of the spool out", metadata: ["apihealth.spool.problem": "\(problem)"])
            }
        }
        let selfMetrics = Locked<Duration?>(nil)
        let schema = self.schema
        self.shipper = Shipper(
            pending: pending, configuration: configuration, clock: clock, logger: logger,
            onIdle: { now in
                guard configuration.isEnabled else { return }
                let due = selfMetrics.withLock { last -> Bool in
                    guard let previous = last else {
                        last = now
                        return false
                    }
                    if now - previous < configuration.selfMetricsInterval { return false }
                    last = now
                    return true
                }
                if due { pending.record(Self.selfMetricsPoint(pending.metrics, schema: schema, configuration: configuration), now: now) }
            })
    }

    // MARK: Recording

    /// Records one request. Safe from any thread; never blocks on I/O.
    public func record(_ sample: RequestSample) {
        guard configuration.isEnabled, let series = schema.series(for: sample) else { return }
        switch series {
        case .success(let series):
            pending.record(series: series, timestamp: Timestamp(date: sample.startedAt), now: clock.now) { fields in
                schema.appendFields(of: sample, to: &fields)
            }
        case .failure:
            pending.countInvalid()
        }
    }

    /// Records any point through the same batches, spool and shipper (a metrics backend's, or your own).
    ///
    /// ```swift
    /// agent.write(Point(measurement: "queue_depth", tags: ["queue": "emails"], fields: ["depth": 42]))
    /// ```
    /// Returns `false` when the point was refused (see ``LineEncoder``) or dropped; both are counted.
    @discardableResult
    public func write(_ point: Point) -> Bool {
        guard configuration.isEnabled else { return false }
        return pending.record(point, now: clock.now)
    }

    /// Records that a response could not be decoded, as a point of the parse-failure measurement.
    ///
    /// ```swift
    /// agent.recordParseFailure(for: request, response: response, error: error, module: "feed")
    /// ```
    public func recordParseFailure(
        for request: URLRequest, response: URLResponse?, error: any Error, module: String, data: Data? = nil
    ) {
        guard configuration.isEnabled, let url = request.url ?? response?.url else { return }
        let (kind, codingPath) = ParseFailureKind.classify(error, data: data)
        let point = schema.parseFailurePoint(
            url: url, method: request.httpMethod ?? "GET", module: module,
            statusCode: (response as? HTTPURLResponse)?.statusCode, kind: kind, codingPath: codingPath, at: Date())
        if let point { pending.record(point, now: clock.now) }
    }

    /// Decodes `data`; when that fails, records a parse failure for the endpoint and rethrows.
    ///
    /// ```swift
    /// let (data, response) = try await session.data(for: request)
    /// let user = try agent.decode(User.self, from: data, for: request, response: response, module: "accounts")
    /// ```
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
    /// Up to 16 configurations can be instrumented at once per process; those of agents that are gone
    /// are reused. Call it after setting the configuration's other options: its requests are re-issued on one
    /// inner session made from a copy of it. Requests behave exactly as without the hook.
    /// `streamsResponseBodies` passes bodies through in chunks on Linux too; set it only for sessions
    /// that use delegate-based data tasks (swift-corelibs-foundation gives a completion handler only
    /// the last chunk a URLProtocol delivers). Apple platforms always stream.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.default
    /// configuration.timeoutIntervalForRequest = 10
    /// agent.instrument(configuration, module: "search")
    /// let session = URLSession(configuration: configuration)
    /// ```
    public func instrument(_ configuration: URLSessionConfiguration, module: String, streamsResponseBodies: Bool = false) {
        guard self.configuration.isEnabled else { return }
        guard
            let hook = CaptureRegistry.shared.register(
                configuration, module: module, recorder: CaptureRecorder(agent: self), streamsBodies: streamsResponseBodies)
        else {
            logger.warning("APIHealth can instrument at most 16 configurations; this one is not instrumented",
                metadata: ["apihealth.module": "\(module)"])
            return
        }
        configuration.protocolClasses = [hook] + (configuration.protocolClasses ?? []).filter { !($0 is InterceptingURLProtocol.Type) }
    }

    // MARK: Life cycle

    /// Ships until graceful shutdown (or task cancellation), then flushes within `shutdownDeadline`.
    public func run() async throws {
        let loops = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.shipper.run() }
                group.addTask { await self.writeThroughLoop() }
            }
        }
        self.loops.withLock { $0 = loops }
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await loops.value
            } onCancel: {
                loops.cancel()
            }
        } onGracefulShutdown: {
            Task { await self.shutdown() }
        }
    }

    /// Starts shipping in the background, for processes that do not use a `ServiceGroup`.
    public func start() {
        Task { try? await self.run() }
    }

    /// Sends the open batch now.
    public func flush() {
        pending.sealOpenBatch()
    }

    /// Sends the open batch now and waits until nothing is pending, or `deadline` has passed.
    /// Returns whether everything was delivered.
    @discardableResult
    public func flush(waitingUpTo deadline: Duration) async -> Bool {
        pending.sealOpenBatch()
        return await waitUntilDelivered(deadline: deadline)
    }

    /// Waits until nothing is pending (or nothing can be sent), or `deadline` has passed.
    private func waitUntilDelivered(deadline: Duration) async -> Bool {
        let end = ContinuousClock.now + deadline
        while ContinuousClock.now < end {
            if pending.isDrained || configuration.destination == nil { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return pending.isDrained
    }

    /// Stops intake and sends everything pending, including batches waiting to be retried, until
    /// `deadline` has passed. What could not be sent stays in the spool for the next start.
    public func shutdown(deadline: Duration = .seconds(10)) async {
        let alreadyStopped = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return stopped
        }
        if !alreadyStopped {
            pending.record(Self.selfMetricsPoint(pending.metrics, schema: schema, configuration: configuration), now: clock.now)
            pending.close()
            shipper.startDraining()
        }
        let delivered = await waitUntilDelivered(deadline: deadline)
        let loops = self.loops.withLock { $0 }
        if !delivered && configuration.destination != nil {
            logger.info(
                "APIHealth shutdown deadline passed; pending lines stay in the spool",
                metadata: ["apihealth.pending.lines": "\(pending.metrics.pendingLines)"])
        }
        loops?.cancel()
        await loops?.value
        let lost = pending.releaseSpool { [logger] failure in
            logger.warning("Writing to the spool failed; points stay in memory", metadata: ["apihealth.error": "\(failure)"])
        }
        if lost > 0 {
            let metrics = pending.metrics
            logger.warning(
                "APIHealth exits with points that are neither delivered nor in the spool",
                metadata: ["apihealth.points.lost": "\(lost)", "apihealth.spool.errors": "\(metrics.spoolWriteErrors)"])
        }
    }

    /// What happened to the points so far.
    public var metrics: AgentMetrics { pending.metrics }

    // MARK: Internals

    private func writeThroughLoop() async {
        while !Task.isCancelled {
            pending.writeThrough { [logger] failure in
                logger.warning("Writing to the spool failed; points stay in memory", metadata: ["apihealth.error": "\(failure)"])
            }
            if pending.isClosed && pending.isDrained { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        pending.writeThrough { _ in }
    }

    static func selfMetricsPoint(_ metrics: AgentMetrics, schema: RequestSchema, configuration: APIHealthConfiguration) -> Point {
        typealias F = PointSchema.AgentField
        var fields: [Point.Field] = [
            Point.Field(F.pointsRecorded, .uint(metrics.pointsRecorded)), Point.Field(F.pointsInvalid, .uint(metrics.pointsInvalid)),
            Point.Field(F.pointsRepaired, .uint(metrics.pointsRepaired)), Point.Field(F.pointsWritten, .uint(metrics.pointsWritten)),
            Point.Field(F.pointsDropped, .uint(metrics.pointsDropped)), Point.Field(F.pointsRejected, .uint(metrics.pointsRejected)),
            Point.Field(F.pointsExpired, .uint(metrics.pointsExpired)), Point.Field(F.retries, .uint(metrics.retries)),
            Point.Field(F.batchesWritten, .uint(metrics.batchesWritten)),
            Point.Field(F.bytesBeforeGzip, .uint(metrics.bytesBeforeGzip)),
            Point.Field(F.bytesAfterGzip, .uint(metrics.bytesAfterGzip)),
            Point.Field(F.pendingLines, .uint(UInt64(metrics.pendingLines))),
            Point.Field(F.pendingBytes, .uint(UInt64(metrics.pendingBytes))),
            Point.Field(F.pathsOverflowed, .uint(schema.pathsOverflowed)),
        ]
        if let error = metrics.lastError { fields.append(Point.Field(F.lastError, .string(String(error.prefix(1_000))))) }
        return Point(
            measurement: configuration.agentMeasurement, tags: [Point.Tag(PointSchema.Tag.service, configuration.serviceName)],
            fields: fields, timestamp: Timestamp(date: Date()))
    }
}

/// The hook's view of an agent (weak, so a registered configuration does not keep the agent alive).
final class CaptureRecorder: SampleRecorder, @unchecked Sendable {
    private weak var agent: APIHealthAgent?
    let correlationHeaders: [String]

    init(agent: APIHealthAgent) {
        self.agent = agent
        self.correlationHeaders = agent.configuration.capture.correlationHeaders
    }

    var isAlive: Bool { agent != nil }
    var isCapturing: Bool { agent?.configuration.isEnabled ?? false }
    func isExcluded(_ url: URL) -> Bool { agent?.isExcluded(url) ?? true }
    func record(_ sample: RequestSample) { agent?.record(sample) }
}

extension APIHealthAgent {
    func isExcluded(_ url: URL) -> Bool { schema.isExcluded(url) }

    /// Every pending point, parsed back (for tests and diagnostics).
    func pendingPoints() -> [Point] {
        (try? LineParser(precision: configuration.precision).parse(pending.pendingBytes())) ?? []
    }
}
