import Foundation
import LineProtocol
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends sealed batches, oldest first, one request at a time, and decides what each answer means.
final class Shipper: Sendable {
    private let pending: PendingBatches
    private let destination: InfluxDestination?
    private let configuration: APIHealthConfiguration
    private let clock: any AgentClock
    private let logger: Logger
    private let session: URLSession
    private let userAgent: String
    /// The last state logged, so each change of state is logged once.
    private let health = Locked(Health.starting)
    private let random = Locked(SystemRandomNumberGenerator())
    /// Shutdown in progress: retries wait briefly instead of backing off.
    private let isDraining = Locked(false)

    enum Health: Equatable {
        case starting
        case healthy
        case failing(String)
        case misconfigured(Int)
        case rejecting
    }

    init(
        pending: PendingBatches,
        configuration: APIHealthConfiguration,
        clock: any AgentClock,
        logger: Logger
    ) {
        self.pending = pending
        self.destination = configuration.destination
        self.configuration = configuration
        self.clock = clock
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

    func startDraining() {
        isDraining.withLock { $0 = true }
        pending.clearRetryWaits()
    }

    /// Runs until the task is cancelled, or intake is closed and nothing is left to send.
    func run() async {
        while !Task.isCancelled {
            let now = clock.now
            let openDeadline = pending.sealDue(now: now)
            if pending.isClosed && (pending.isDrained || destination == nil) { return }
            guard destination != nil else {
                await pending.wakeup.wait(until: openDeadline, on: clock)
                continue
            }
            switch pending.next(now: now, openDeadline: openDeadline) {
            case .wait(let deadline):
                await pending.wakeup.wait(until: deadline, on: clock)
            case .send(let segment, let body, let lineCount, let lineBytes):
                await send(segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes)
            }
        }
    }

    /// Makes the bodies of the batches waiting behind the one being sent, so a backlog is held
    /// compressed (see ``PendingBatches/makeWaitingBodies(_:)``). Nothing without a destination.
    func makeWaitingBodies() {
        guard destination != nil else { return }
        pending.makeWaitingBodies(makeBody)
    }

    /// The request body of `lines`: gzip at the configured level, of the lines as this destination
    /// takes them. `nil` if gzip failed.
    private func makeBody(_ lines: [UInt8]) -> [UInt8]? {
        var payload = lines
        if case .v1 = destination?.api {
            // Lines kept for another destination (or before one was set) may carry unsigned values,
            // which InfluxDB 1.x refuses: they go out as integers, clamped values counted once.
            let rewrite = LineEncoder.rewritingUnsignedAsSigned(lines)
            if rewrite.rewrittenFields > 0 { payload = rewrite.lines }
            if rewrite.clampedLines > 0 { pending.countRepaired(rewrite.clampedLines) }
        }
        return try? Gzip.compress(payload, level: configuration.gzipLevel)
    }

    private func send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int) async {
        guard let destination else { return }
        guard let body = body ?? pending.body(of: segment, making: makeBody) else {
            pending.reject(segment, reason: "gzip failed")
            return
        }
        var request = URLRequest(url: destination.writeURL(precision: configuration.precision))
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.timeoutInterval = configuration.requestTimeout.secondsDouble
        request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        request.setValue("text/plain; charset=utf-8", forHTTPHeaderField: "Content-Type")
        request.setValue(userAgent, forHTTPHeaderField: "User-Agent")
        if let token = destination.token {
            request.setValue("Token \(token.value)", forHTTPHeaderField: "Authorization")
        }

        let outcome: WriteOutcome
        do {
            let (data, response) = try await session.data(for: request)
            guard let http = response as? HTTPURLResponse else {
                outcome = .retry(reason: "not an HTTP response", retryAfter: nil)
                return await handle(outcome, segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes)
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                headers[String(describing: name).lowercased()] = String(describing: value)
            }
            outcome = WriteOutcome.classify(status: http.statusCode, headers: headers, body: data)
        } catch {
            if Task.isCancelled { return }
            outcome = .retry(reason: Self.describe(error), retryAfter: nil)
        }
        await handle(outcome, segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes)
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
        lineBytes: Int
    ) async {
        let now = clock.now
        switch outcome {
        case .delivered:
            pending.acknowledge(segment, sentBytes: lineBytes, compressedBytes: body.count)
            transition(to: .healthy)
        case .rejected(let status, let message, let dropped):
            let firstLine = ((try? Gzip.decompress(body)) ?? []).prefix { $0 != UInt8(ascii: "\n") }
            if transition(to: .rejecting) {
                logger.info(
                    "InfluxDB refused a batch; it is kept in the spool's rejected/ area",
                    metadata: [
                        "apihealth.status": "\(status)", "apihealth.message": "\(message.prefix(500))",
                        "apihealth.first_line": "\(String(decoding: firstLine.prefix(300), as: UTF8.self))",
                        "apihealth.batch.lines": "\(lineCount)",
                    ]
                )
            }
            pending.reject(segment, reason: "HTTP \(status): \(message)", count: dropped)
        case .tooLarge:
            if !pending.split(segment) {
                pending.reject(segment, reason: "HTTP 413: a single line is larger than the server accepts")
            }
        case .misconfigured(let status, let message):
            if transition(to: .misconfigured(status)) {
                logger.info(
                    "InfluxDB refused the agent's credentials or target; data is kept and retried",
                    metadata: ["apihealth.status": "\(status)", "apihealth.message": "\(message.prefix(500))"]
                )
            }
            scheduleRetry(segment, error: "HTTP \(status): \(message)", retryAfter: nil, now: now, expires: false)
        case .retry(let reason, let retryAfter):
            if transition(to: .failing(reason)) {
                logger.info(
                    "Writing to InfluxDB failed; retrying with backoff",
                    metadata: ["apihealth.error": "\(reason)"]
                )
            }
            scheduleRetry(segment, error: reason, retryAfter: retryAfter, now: now, expires: true)
        }
    }

    private func scheduleRetry(_ segment: String, error: String, retryAfter: Duration?, now: Duration, expires: Bool) {
        let attempt = pending.attempts(of: segment) + 1
        var delay = retryAfter ?? random.withLock { configuration.retry.delay(afterAttempt: attempt, using: &$0) }
        if isDraining.withLock({ $0 }) { delay = min(delay, AgentIntervals.drainingRetryDelay) }
        _ = pending.scheduleRetry(
            segment,
            notBefore: now + delay,
            now: now,
            error: error,
            retryLimit: expires ? configuration.retry.maximumRetryDuration : nil
        )
    }

    /// Records the new state; `true` when it changed (and should be logged).
    @discardableResult
    private func transition(to next: Health) -> Bool {
        health.withLock { current in
            let changed: Bool
            switch (current, next) {
            case (.failing, .failing): changed = false
            default: changed = current != next
            }
            if changed, case .healthy = next, current != .starting {
                logger.info("Writing to InfluxDB works again")
            }
            current = next
            return changed
        }
    }
}
