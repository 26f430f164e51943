import Foundation
import LineProtocol
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends the sealed batches one destination still needs, oldest first, one request at a time, to the
/// URL of its failover group in use, and decides what each answer means. One per destination, each
/// with its own cursor over the pending batches, retry schedule and session.
///
/// What it keeps between sends (``Shipper/Loop``: the URL in use, each URL's backoff, the state last
/// logged) is its loop's own, a value no other thread sees: ``run(resuming:)`` returns it, and the
/// agent's last round after the drain starts from it.
final class Shipper: Sendable {
    private let pending: PendingBatches
    /// Which of the configured destinations it ships to (its cursor in the pending batches).
    let id: DestinationID
    /// Records what was captured but not yet recorded, so a batch sealed now holds it.
    private let beforeSealing: @Sendable () -> Void
    private let destination: InfluxDestination?
    private let configuration: APIHealthConfiguration
    private let clock: any AgentClock
    /// Given each response's `Date` header, when the agent corrects its clock.
    private let clockCorrection: ClockCorrection?
    private let logger: Logger
    private let session: URLSession
    private let userAgent: String
    /// What the shipper's loop keeps between sends, and hands from its drain to its last round.
    struct Loop: Sendable {
        /// The last state logged, so each change of state is logged once.
        fileprivate var health = Health.starting
        /// The failover group: the URL in use and each URL's backoff.
        fileprivate var endpoints: EndpointGroup
        /// The generator of the retry delays' jitter.
        fileprivate var random = SystemRandomNumberGenerator()
        /// The gzip memory the loop makes bodies in.
        fileprivate let compression = GzipWorkspace()
    }

    enum Health: Equatable {
        case starting
        case healthy
        case failing(String)
        case misconfigured(Int)
        case rejecting
    }

    /// The shipper of destination `id` of `configuration` (none: it only seals batches).
    init(
        pending: PendingBatches,
        destination id: DestinationID,
        configuration: APIHealthConfiguration,
        clock: any AgentClock,
        clockCorrection: ClockCorrection? = nil,
        logger: Logger,
        beforeSealing: @escaping @Sendable () -> Void
    ) {
        self.pending = pending
        self.id = id
        self.beforeSealing = beforeSealing
        let index = id.index
        let destination = configuration.destinations.indices.contains(index) ? configuration.destinations[index] : nil
        self.destination = destination
        self.configuration = configuration
        self.clock = clock
        self.clockCorrection = clockCorrection
        var logger = logger
        if let destination, configuration.destinations.count > 1 {
            logger[metadataKey: "apihealth.destination"] = "\(destination.displayName)"
        }
        self.logger = logger
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.requestTimeout.secondsDouble
        sessionConfiguration.timeoutIntervalForResource = configuration.requestTimeout.secondsDouble * 2
        sessionConfiguration.httpMaximumConnectionsPerHost = 1
        sessionConfiguration.urlCache = nil
        sessionConfiguration.httpCookieStorage = nil
        self.session = URLSession(configuration: sessionConfiguration)
        self.userAgent = "apihealth/1.0 (\(configuration.serviceName))"
    }

    /// The loop's state at its first start: a URL of the failover group drawn at random, none backing off.
    private func startingLoop() -> Loop {
        let urls = destination?.urls ?? []
        return Loop(endpoints: EndpointGroup(urls: urls, start: urls.isEmpty ? 0 : Int.random(in: 0..<urls.count)))
    }

    /// Runs until the task is cancelled, or intake is closed and nothing is left to send; returns what it
    /// kept, for a later run to resume from (`nil`: the first run).
    @discardableResult
    func run(resuming kept: Loop? = nil) async -> Loop {
        var loop = kept ?? startingLoop()
        // Drawn once per shipper: how much later than the others this replica flushes.
        let jitter =
            configuration.batching.flushJitter > .zero
            ? Duration.nanoseconds(Int64.random(in: 0...configuration.batching.flushJitter.nanoseconds))
            : .zero
        while !Task.isCancelled {
            let now = clock.now
            beforeSealing()
            let openDeadline = pending.sealDue(now: now, jitter: jitter)
            if pending.isClosed && (pending.isDrained(for: id) || destination == nil) { return loop }
            guard destination != nil else {
                await pending.wakeup(for: id).wait(until: openDeadline, on: clock)
                continue
            }
            switch pending.next(now: now, openDeadline: openDeadline, for: id) {
            case .wait(let deadline):
                await pending.wakeup(for: id).wait(until: deadline, on: clock)
            case .send(let segment, let body, let lineCount, let lineBytes):
                await send(segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes, &loop)
            }
        }
        return loop
    }

    private func send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int, _ loop: inout Loop) async {
        guard let destination else { return }
        guard let body = body ?? pending.body(of: segment, compressingIn: loop.compression) else {
            pending.reject(segment, reason: "gzip failed", refused: .all, for: id)
            return
        }
        let url = loop.endpoints.currentURL
        let precision = destination.precision ?? configuration.precision
        var request = URLRequest(url: destination.writeURL(at: url, precision: precision))
        request.httpMethod = "POST"
        if destination.compression == .identity || precision != configuration.precision {
            // This destination's own form of the shared body: plain, or at its coarser precision.
            guard var lines = try? Gzip.decompress(body) else {
                pending.reject(segment, reason: "gzip body cannot be read back", refused: .all, for: id)
                return
            }
            if precision != configuration.precision {
                lines = PrecisionRewrite.rewrite(lines, from: configuration.precision, to: precision)
            }
            var compressed: [UInt8] = []
            if destination.compression == .gzip,
                (try? Gzip.compress(lines, level: configuration.gzipLevel, into: &compressed, keeping: loop.compression))
                    != nil
            {
                request.httpBody = Data(compressed)
                request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
            } else {
                request.httpBody = Data(lines)
            }
        } else {
            request.httpBody = Data(body)
            request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        }
        request.timeoutInterval = configuration.requestTimeout.secondsDouble
        request.setValue("text/plain; charset=utf-8", forHTTPHeaderField: "Content-Type")
        request.setValue(userAgent, forHTTPHeaderField: "User-Agent")
        for (name, value) in destination.headers { request.setValue(value, forHTTPHeaderField: name) }
        if let token = destination.token {
            request.setValue("Token \(token.value)", forHTTPHeaderField: "Authorization")
        }

        let outcome: WriteOutcome
        do {
            let sentAt = clock.wallNow
            let (data, response) = try await Self.send(request, through: session)
            guard let http = response as? HTTPURLResponse else {
                outcome = .retry(reason: "not an HTTP response", retryAfter: nil)
                return handle(outcome, segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes, &loop)
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                headers[String(describing: name).lowercased()] = String(describing: value)
            }
            // Only a success is the destination's own answer: a 5xx may be a proxy's, with a clock of its own.
            if (200..<300).contains(http.statusCode) {
                clockCorrection?.observe(
                    dateHeader: headers["date"],
                    age: headers["age"],
                    sentAt: sentAt,
                    receivedAt: clock.wallNow,
                    from: .destination
                )
            }
            outcome = WriteOutcome.classify(status: http.statusCode, headers: headers, body: data)
        } catch {
            if Task.isCancelled { return }
            outcome = .retry(reason: Self.describe(error), retryAfter: nil, unreachable: Self.isUnreachable(error))
        }
        handle(outcome, segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes, &loop)
    }

    /// Sends `request` and returns the answer, as `URLSession.data(for:)` does, but cancels the task off the
    /// cancelling thread. swift-corelibs-foundation's `data(for:)` cancels from its task cancellation handler,
    /// under the Swift task's status lock, with a `sync` on the task's work queue; when that queue is at that
    /// moment resuming the awaiting task (the answer came), it waits for the same lock, and both threads
    /// stop for good: a shutdown whose deadline passed while a post was answered hung the process.
    private static func send(_ request: URLRequest, through session: URLSession) async throws -> (Data, URLResponse) {
        let (answers, answer) = AsyncThrowingStream<(Data, URLResponse), any Error>.makeStream()
        let task = session.dataTask(with: request) { data, response, error in
            if let response, error == nil {
                answer.yield((data ?? Data(), response))
                answer.finish()
            } else {
                answer.finish(throwing: error ?? URLError(.badServerResponse))
            }
        }
        return try await withTaskCancellationHandler {
            task.resume()
            for try await received in answers { return received }
            throw CancellationError()
        } onCancel: {
            DispatchQueue.global().async { task.cancel() }
        }
    }

    /// Whether no server could be reached at all (refused, no route, no such host): such a URL is
    /// probed again soon. A timeout means a server that took the request and is slow: full backoff.
    private static func isUnreachable(_ error: any Error) -> Bool {
        let nsError = error as NSError
        guard nsError.domain == NSURLErrorDomain else { return false }
        return [
            NSURLErrorCannotConnectToHost, NSURLErrorCannotFindHost, NSURLErrorDNSLookupFailed,
            NSURLErrorNotConnectedToInternet, NSURLErrorNetworkConnectionLost,
        ].contains(nsError.code)
    }

    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        return "\(nsError.domain) \(nsError.code): \(nsError.localizedDescription)"
    }

    private func handle(
        _ outcome: WriteOutcome,
        segment: String,
        body: [UInt8],
        lineCount: Int,
        lineBytes: Int,
        _ loop: inout Loop
    ) {
        let now = clock.now
        let url = InfluxDestination.redacted(loop.endpoints.currentURL.absoluteString)
        switch outcome {
        case .delivered:
            loop.endpoints.succeeded()
            pending.acknowledge(segment, sentBytes: lineBytes, compressedBytes: body.count, for: id)
            transition(to: .healthy, &loop)
        case .rejected(let status, let message, let dropped):
            loop.endpoints.succeeded()
            let firstLine = ((try? Gzip.decompress(body)) ?? []).prefix { $0 != UInt8(ascii: "\n") }
            if transition(to: .rejecting, &loop) {
                logger.info(
                    "InfluxDB refused a batch; it is kept in the spool's rejected/ area",
                    metadata: [
                        "apihealth.status": "\(status)", "apihealth.message": "\(message.prefix(500))",
                        "apihealth.first_line": "\(String(decoding: firstLine.prefix(300), as: UTF8.self))",
                        "apihealth.batch.lines": "\(lineCount)",
                    ]
                )
            }
            pending.reject(
                segment,
                reason: "HTTP \(status): \(message)",
                refused: dropped.map { .count($0) } ?? .all,
                for: id
            )
        case .partial(let refused):
            loop.endpoints.succeeded()
            if transition(to: .rejecting, &loop) {
                logger.info(
                    "InfluxDB stored a batch but for some lines; they are kept in the spool's rejected/ area",
                    metadata: [
                        "apihealth.batch.lines": "\(lineCount)", "apihealth.refused.lines": "\(refused.count)",
                        "apihealth.first_refusal": "\(refused.min { $0.key < $1.key }?.value.prefix(300) ?? "")",
                    ]
                )
            }
            let summary = refused.sorted { $0.key < $1.key }.map { "line \($0.key): \($0.value)" }
                .joined(separator: "\n")
            pending.reject(segment, reason: summary, refused: .numbered(refused), for: id)
        case .tooLarge:
            loop.endpoints.succeeded()
            if !pending.split(segment, for: id) {
                pending.reject(
                    segment,
                    reason: "HTTP 413: a single line is larger than the server accepts",
                    refused: .all,
                    for: id
                )
            }
        case .misconfigured(let status, let message):
            let firstTime = loop.endpoints.reportConfigurationError(status)
            if firstTime {
                let destinations = pending.currentMetrics.destinations
                let backlog = destinations.indices.contains(id.index) ? destinations[id.index] : DestinationMetrics()
                logger.warning(
                    "InfluxDB refused the agent's credentials or target; points are kept and retried, and dropped once the backlog reaches its cap",
                    metadata: [
                        "apihealth.url": "\(url)", "apihealth.status": "\(status)",
                        "apihealth.message": "\(message.prefix(500))",
                        "apihealth.points.pending": "\(backlog.pendingLines)",
                        "apihealth.points.dropped": "\(backlog.pointsDropped)",
                    ]
                )
            }
            transition(to: .misconfigured(status), &loop)
            scheduleRetry(
                segment,
                error: "HTTP \(status): \(message)",
                retryAfter: nil,
                now: now,
                expires: false,
                &loop
            )
        case .retry(let reason, let retryAfter, let unreachable):
            if transition(to: .failing(reason), &loop) {
                logger.info(
                    "Writing to InfluxDB failed; retrying with backoff",
                    metadata: ["apihealth.url": "\(url)", "apihealth.error": "\(reason)"]
                )
            }
            scheduleRetry(
                segment,
                error: reason,
                retryAfter: retryAfter,
                now: now,
                expires: true,
                unreachable: unreachable,
                &loop
            )
        }
    }

    /// Backs the URL in use off (a `Retry-After`, or the policy's delay for its failures in a row, no
    /// longer than the reconnect delay when it could not be reached) and moves to the next URL of the
    /// group; the destination waits only if every URL is backing off.
    private func scheduleRetry(
        _ segment: String,
        error: String,
        retryAfter: Duration?,
        now: Duration,
        expires: Bool,
        unreachable: Bool = false,
        _ loop: inout Loop
    ) {
        let attempt = loop.endpoints.currentFailures + 1
        var delay = retryAfter ?? configuration.retry.delay(afterAttempt: attempt, using: &loop.random)
        if unreachable && retryAfter == nil { delay = min(delay, configuration.retry.maximumReconnectDelay) }
        // Shutdown in progress (intake closed): retries wait briefly instead of backing off.
        if pending.isClosed { delay = min(delay, AgentIntervals.drainingRetryDelay) }
        let notBefore = loop.endpoints.failed(until: now + delay, now: now)
        pending.scheduleRetry(
            segment,
            notBefore: notBefore,
            now: now,
            error: error,
            retryLimit: expires ? configuration.retry.maximumRetryDuration : nil,
            for: id
        )
    }

    /// Records the new state; `true` when it changed (and should be logged).
    @discardableResult
    private func transition(to next: Health, _ loop: inout Loop) -> Bool {
        let current = loop.health
        loop.health = next
        let (changed, worksAgain): (Bool, Bool)
        switch (current, next) {
        case (.failing, .failing): (changed, worksAgain) = (false, false)
        case (.starting, _): (changed, worksAgain) = (current != next, false)
        case (_, .healthy): (changed, worksAgain) = (current != next, current != next)
        default: (changed, worksAgain) = (current != next, false)
        }
        if worksAgain { logger.info("Writing to InfluxDB works again") }
        return changed
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64`.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? (seconds < 0 ? .min : .max) : total
    }
}
