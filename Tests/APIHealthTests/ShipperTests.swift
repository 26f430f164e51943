import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// Collects log messages so tests can check what was logged, and what never is.
final class CollectingLogHandler: LogHandler, @unchecked Sendable {
    static let messages = Locked([String]())
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    let label: String
    init(label: String) { self.label = label }

    func log(event: LogEvent) {
        let text = "\(event.message) \(event.metadata ?? [:])"
        Self.messages.withLock { $0.append("\(label): \(text)") }
    }
}

struct ShipperHarness {
    let fault: FaultServer
    let clock = ManualClock()
    let agent: APIHealthAgent
    let spool: URL
    let label = "shipper-\(UUID().uuidString)"

    init(
        fault: FaultServer,
        url: URL? = nil,
        api: InfluxDestination.WriteAPI = .v2(organization: "acme", bucket: "apis"),
        configure: (inout APIHealthConfiguration) -> Void = { _ in }
    ) throws {
        self.fault = fault
        spool = temporaryDirectory("shipper")
        var configuration = APIHealthConfiguration(
            serviceName: "shipper-tests",
            destination: InfluxDestination(url: url ?? fault.url, api: api, token: InfluxToken("t0ken-value")))
        configuration.spool = SpoolOptions(directory: spool)
        configuration.retry.jitter = 0
        configuration.selfMetricsInterval = .seconds(86_400)
        configure(&configuration)
        let label = self.label
        agent = try APIHealthAgent(
            configuration: configuration, logger: Logger(label: label, factory: { CollectingLogHandler(label: $0) }),
            clock: clock)
        agent.start()
    }

    func write(_ count: Int, from start: Int = 0) {
        for index in start..<(start + count) {
            agent.write(
                Point(measurement: "test", tags: [Point.Tag("n", "\(index)")], fields: [Point.Field("v", .int(Int64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000 + Int64(index))))
        }
    }

    /// The `n` tags of the test lines the server stored.
    var storedIndices: [Int] {
        fault.stored.filter { $0.hasPrefix("test,") }.compactMap { line in
            line.split(separator: " ").first?.split(separator: "=").last.flatMap { Int($0) }
        }
    }

    var logs: [String] { CollectingLogHandler.messages.withLock { $0.filter { $0.hasPrefix(label) } } }

    /// Lets the background loop act on what it was just given (real time), before a check that it did
    /// *not* do something. Never what a check that something happened relies on: that waits for it.
    func settle() async { try? await Task.sleep(for: .milliseconds(150)) }

    /// Waits until the shipper has decided to wait `delay` from the clock's present time (a retry
    /// scheduled), so that moving the clock on cannot come before its decision and shift its deadline.
    func waitForRetry(in delay: Duration) async -> Bool {
        await clock.waitForSleeper(until: clock.now + delay)
    }

    func finish() async {
        await agent.shutdown(deadline: .seconds(1))
        await fault.shutdown()
        try? FileManager.default.removeItem(at: spool)
    }
}

@Suite struct ShipperTests {
    @Test func debounceWaitsForQuietAndMaximumAgeCapsTheWait() async throws {
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault) { $0.batching.maximumAge = .seconds(12) }
        harness.write(1)
        harness.clock.advance(by: .seconds(4))
        harness.write(1, from: 1)
        harness.clock.advance(by: .milliseconds(4_900))
        await harness.settle()
        #expect(fault.requests.isEmpty, "4.9 s after the last point: still debouncing")
        harness.clock.advance(by: .milliseconds(100))
        #expect(await fault.waitForRequests(1))
        #expect(harness.storedIndices == [0, 1])

        // Steady traffic every 3 s never leaves 5 s of quiet: the maximum age (12 s) sends it.
        for second in stride(from: 0, to: 12, by: 3) {
            harness.write(1, from: 10 + second)
            harness.clock.advance(by: .seconds(3))
            await harness.settle()
        }
        #expect(await fault.waitForRequests(2))
        #expect(harness.storedIndices == [0, 1, 10, 13, 16, 19])
        await harness.finish()
    }

    @Test func retryAfterIsHonoured() async throws {
        let fault = try await FaultServer.start { index, _ in
            index == 0 ? .text(429, "slow down", headers: [("Retry-After", "30")]) : .text(204, "")
        }
        let harness = try ShipperHarness(fault: fault)
        harness.write(3)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        #expect(await harness.waitForRetry(in: .seconds(30)))
        harness.clock.advance(by: .seconds(29))
        await harness.settle()
        #expect(fault.requests.count == 1, "not before Retry-After")
        harness.clock.advance(by: .seconds(1))
        #expect(await fault.waitForRequests(2))
        #expect(harness.storedIndices == [0, 1, 2])
        #expect(harness.agent.metrics.retries == 1)
        await harness.finish()
    }

    @Test func serverErrorsBackOffExponentiallyAndDeliverExactlyOnce() async throws {
        let fault = try await FaultServer.start { index, _ in
            index < 3 ? .text(index == 1 ? 503 : 500, "try later") : .text(204, "")
        }
        let harness = try ShipperHarness(fault: fault)
        harness.write(5)
        harness.agent.flush()
        for (attempt, wait) in [(1, 5), (2, 10), (3, 20)] {
            #expect(await fault.waitForRequests(attempt))
            #expect(await harness.waitForRetry(in: .seconds(wait)), "attempt \(attempt + 1) is scheduled")
            harness.clock.advance(by: .seconds(wait - 1))
            await harness.settle()
            #expect(fault.requests.count == attempt, "attempt \(attempt + 1) waits \(wait) s")
            harness.clock.advance(by: .seconds(1))
        }
        #expect(await fault.waitForRequests(4))
        #expect(await waitUntil { harness.agent.metrics.pointsWritten == 5 })
        await harness.settle()
        #expect(harness.storedIndices == [0, 1, 2, 3, 4], "delivered once")
        #expect(harness.agent.metrics.pointsWritten == 5)
        #expect(harness.agent.metrics.retries == 3)
        #expect(harness.logs.filter { $0.contains("retrying") }.count == 1, "logged once per change of state")
        await harness.finish()
    }

    @Test func tooLargeBatchesAreSplitDownToWhatTheServerTakes() async throws {
        let fault = try await FaultServer.start { _, lines in lines.count > 2 ? .text(413, "too large") : .text(204, "") }
        let harness = try ShipperHarness(fault: fault)
        harness.write(10)
        harness.agent.flush()
        #expect(await waitUntil { harness.storedIndices.count >= 10 && harness.agent.metrics.pointsWritten >= 10 })
        await harness.settle()
        #expect(harness.storedIndices == Array(0..<10), "every line once, in order")
        #expect(fault.requests.filter { $0.count <= 2 }.allSatisfy { !$0.isEmpty })
        #expect(harness.agent.metrics.pointsWritten == 10)
        await harness.finish()
    }

    @Test func rejectedBatchesAreCountedKeptAndDoNotBlockTheNext() async throws {
        let fault = try await FaultServer.start { index, _ in
            index == 0
                ? .json(400, #"{"error":"partial write: unable to parse 'test,n=1 v=1i': bad dropped=2"}"#)
                : .text(204, "")
        }
        let harness = try ShipperHarness(fault: fault)
        harness.write(3)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        await harness.settle()
        harness.write(2, from: 3)
        harness.agent.flush()
        #expect(await fault.waitForRequests(2))
        await harness.settle()
        #expect(harness.storedIndices == [3, 4])
        #expect(harness.agent.metrics.pointsRejected == 2, "the server's dropped=N")
        let rejected = try SpoolReader(directory: harness.spool).rejected()
        #expect(rejected.count == 1)
        #expect(rejected.first?.lines.count == 3)
        #expect(rejected.first?.reason.contains("partial write") == true)
        #expect(harness.logs.contains { $0.contains("first_line") && $0.contains("test,n=0") })
        await harness.finish()
    }

    @Test func aHungConnectionTimesOutAndIsRetried() async throws {
        let fault = try await FaultServer.start { index, _ in
            index == 0 ? LoopbackHTTPServer.Response(status: 204, body: .hang) : .text(204, "")
        }
        let harness = try ShipperHarness(fault: fault) { $0.requestTimeout = .seconds(1) }
        harness.write(2)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        // The request times out after 1 s of real time, however long that takes to be noticed.
        #expect(await harness.waitForRetry(in: .seconds(5)))
        harness.clock.advance(by: .seconds(5))
        #expect(await fault.waitForRequests(2))
        #expect(harness.storedIndices == [0, 1])
        #expect(
            await waitUntil { harness.agent.metrics.lastError == nil },
            "\(String(describing: harness.agent.metrics.lastError))"
        )
        await harness.finish()
    }

    @Test func serverDownForAWhileThenUpLosesNothing() async throws {
        let down = try RefusingPort()
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault, url: down.url)
        harness.write(50)
        harness.agent.flush()
        // Each refused attempt schedules the next within the longest backoff (125 s); the clock moves
        // past it only once the attempt has failed.
        for attempt in 1...3 {
            #expect(await waitUntil { harness.agent.metrics.retries >= attempt }, "attempt \(attempt) failed")
            harness.clock.advance(by: .seconds(130))
        }
        #expect(harness.agent.metrics.retries >= 3)
        #expect(harness.agent.metrics.pendingLines == 50)
        let up = try await FaultServer.start(on: down) { _, _ in .text(204, "") }
        harness.write(50, from: 50)
        harness.agent.flush()
        // Whatever retry wait is pending when the server comes up ends within 130 s of clock time.
        let delivered = await waitUntil {
            if up.stored.count >= 100 && harness.agent.metrics.pointsWritten >= 100 { return true }
            if let next = harness.clock.nextDeadline, next <= harness.clock.now + .seconds(130) {
                harness.clock.advance(by: .seconds(130))
            }
            return false
        }
        #expect(delivered)
        #expect(up.stored.count == 100)
        #expect(harness.agent.metrics.pointsWritten == 100)
        await up.shutdown()
        await harness.finish()
    }

    @Test func credentialsProblemsKeepTheDataAndNeverLogTheToken() async throws {
        let fault = try await FaultServer.start { index, _ in index < 2 ? .text(401, "unauthorized") : .text(204, "") }
        let harness = try ShipperHarness(fault: fault)
        harness.write(4)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        #expect(await harness.waitForRetry(in: .seconds(5)))
        harness.clock.advance(by: .seconds(5))
        #expect(await fault.waitForRequests(2))
        #expect(await harness.waitForRetry(in: .seconds(10)))
        harness.clock.advance(by: .seconds(10))
        #expect(await fault.waitForRequests(3))
        #expect(await waitUntil { harness.agent.metrics.pointsWritten == 4 })
        #expect(harness.storedIndices == [0, 1, 2, 3])
        #expect(fault.requestHeaders.first?["authorization"] == "Token t0ken-value")
        #expect(harness.logs.filter { $0.contains("credentials") }.count == 1)
        #expect(!harness.logs.joined().contains("t0ken-value"))
        #expect(fault.requestURIs.first == "/api/v2/write?org=acme&bucket=apis&precision=ns")
        #expect(fault.requestHeaders.first?["content-encoding"] == "gzip")
        await harness.finish()
    }

    @Test func pendingMemoryIsCappedDroppingTheOldest() async throws {
        let down = try RefusingPort()
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault, url: down.url) {
            $0.batching.maximumBytes = 16 * 1_024
            $0.batching.maximumPendingBytes = 64 * 1_024
        }
        harness.write(20_000)
        let metrics = harness.agent.metrics
        #expect(metrics.pendingBytes <= 64 * 1_024 + 16 * 1_024)
        #expect(metrics.pointsDropped > 10_000)
        #expect(metrics.pointsRecorded == 20_000)
        #expect(UInt64(metrics.pendingLines) + metrics.pointsDropped == 20_000, "every point is pending or counted dropped")
        await harness.finish()
    }

    @Test func theV1WriteAPIUsesDatabaseAndPrecision() async throws {
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault, api: .v1(database: "apis", retentionPolicy: "week"))
        harness.write(1)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        #expect(fault.requestURIs.first == "/write?db=apis&rp=week&precision=ns")
        await harness.finish()
    }
}

@Suite struct RetryPolicyTests {
    @Test func delaysDoubleUpToTheCapWithBoundedJitter() {
        let policy = RetryPolicy()
        #expect((1...7).map { policy.baseDelay(afterAttempt: $0) } == [5, 10, 20, 40, 80, 125, 125].map { .seconds($0) })
        var random = SystemRandomNumberGenerator()
        for attempt in 1...10 {
            let delay = policy.delay(afterAttempt: attempt, using: &random)
            let base = policy.baseDelay(afterAttempt: attempt)
            #expect(delay >= base * 0.8 && delay <= base * 1.2)
        }
    }

    /// Every attempt count gives a delay no longer than the maximum, even where `multiplierⁿ` alone
    /// is past what a `Duration` holds (multiplier 3 passed it at attempt 42 and trapped).
    @Test func everyAttemptCountGivesADelayWithinTheMaximum() throws {
        func policy(_ initial: Duration, _ multiplier: Double, _ maximum: Duration, jitter: Double) -> RetryPolicy {
            var policy = RetryPolicy()
            policy.initialDelay = initial
            policy.multiplier = multiplier
            policy.maximumDelay = maximum
            policy.jitter = jitter
            return policy
        }
        let policies = [
            RetryPolicy(),
            policy(.seconds(10), 3, .seconds(600), jitter: 0.5),
            policy(.seconds(10), 10, .seconds(Int64.max / 2), jitter: 1),
            policy(.milliseconds(1), 1, .seconds(1), jitter: 0),
            policy(.seconds(1), 1.5, .seconds(1), jitter: 0.2),
            policy(.zero, 2, .zero, jitter: 0.2),
        ]
        var random = SystemRandomNumberGenerator()
        for policy in policies {
            try policy.validate()
            for attempt in 0...10_000 {
                let base = policy.baseDelay(afterAttempt: attempt)
                let delay = policy.delay(afterAttempt: attempt, using: &random)
                guard base <= policy.maximumDelay, base >= .zero, delay <= policy.maximumDelay, delay >= .zero,
                    base.secondsDouble.isFinite, delay.secondsDouble.isFinite
                else {
                    Issue.record("\(policy), attempt \(attempt): base \(base), delay \(delay)")
                    return
                }
            }
            if policy.multiplier > 1 && policy.initialDelay > .zero {
                #expect(policy.baseDelay(afterAttempt: 10_000) == policy.maximumDelay)
            }
        }
    }

    @Test func outOfRangeSettingsAreRefusedByValidation() {
        func refused(_ name: String, _ change: (inout RetryPolicy) -> Void) -> Bool {
            var configuration = APIHealthConfiguration(serviceName: "s")
            change(&configuration.retry)
            do {
                try configuration.validate()
                return false
            } catch {
                if case .invalidValue(let refusedName, _) = error { return refusedName == name }
                return false
            }
        }
        #expect(refused("retry.multiplier") { $0.multiplier = .infinity })
        #expect(refused("retry.multiplier") { $0.multiplier = .nan })
        #expect(refused("retry.multiplier") { $0.multiplier = 0.5 })
        #expect(refused("retry.jitter") { $0.jitter = -0.1 })
        #expect(refused("retry.jitter") { $0.jitter = 1.5 })
        #expect(refused("retry.jitter") { $0.jitter = .nan })
        #expect(refused("retry.initialDelay") { $0.initialDelay = .seconds(-1) })
        #expect(refused("retry.initialDelay") { $0.initialDelay = .seconds(200) })
        #expect(refused("retry.maximumDelay") { $0.maximumDelay = .seconds(-1) })
        #expect(refused("retry.maximumRetryDuration") { $0.maximumRetryDuration = .seconds(-1) })
        #expect(!refused("") { $0.jitter = 1 })
    }

    @Test func retryAfterReadsSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryPolicy.retryAfter("120", now: now) == .seconds(120))
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == .seconds(30))
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:40:00 GMT", now: now) == .zero)
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
    }

    @Test func answersAreClassifiedAsTheWriteAPIDocuments() {
        #expect(WriteOutcome.classify(status: 204, headers: [:], body: Data()) == .delivered)
        #expect(WriteOutcome.classify(status: 413, headers: [:], body: Data()) == .tooLarge)
        #expect(WriteOutcome.classify(status: 429, headers: ["retry-after": "7"], body: Data()) == .retry(reason: "HTTP 429 ", retryAfter: .seconds(7)))
        #expect(WriteOutcome.classify(status: 403, headers: [:], body: Data("no".utf8)) == .misconfigured(status: 403, message: "no"))
        #expect(WriteOutcome.classify(status: 422, headers: [:], body: Data("partial write: x dropped=3".utf8)) == .rejected(status: 422, message: "partial write: x dropped=3", dropped: 3))
    }
}
