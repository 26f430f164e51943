import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

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
            destination: InfluxDestination(url: url ?? fault.url, api: api, token: InfluxToken("t0ken-value"))
        )
        configuration.spool = SpoolOptions(directory: spool)
        configuration.retry.jitter = 0
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        configure(&configuration)
        let label = self.label
        agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: label, factory: { CollectingLogHandler(label: $0) }),
            clock: clock
        )
        agent.start()
    }

    func write(_ count: Int, from start: Int = 0) {
        for index in start..<(start + count) {
            agent.write(
                Point(
                    measurement: "test",
                    tags: [Point.Tag("n", "\(index)")],
                    fields: [Point.Field("v", .int(Int64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000 + Int64(index))
                )
            )
        }
    }

    /// The `n` tags of the test lines the server stored.
    var storedIndices: [Int] {
        fault.stored.filter { $0.hasPrefix("test,") }.compactMap { line in
            line.split(separator: " ").first?.split(separator: "=").last.flatMap { Int($0) }
        }
    }

    var logs: [String] { CollectingLogHandler.messages.withLock { $0.filter { $0.hasPrefix(label) } } }

    /// Waits until the shipper has decided to wait `delay` from the clock's present time (a retry
    /// scheduled), so that moving the clock on cannot come before its decision and shift its deadline.
    func waitForRetry(in delay: Duration) async -> Bool {
        await clock.waitForSleeper(until: clock.now + delay)
    }

    /// Waits until the shipper sleeps until `deadline` on the clock: it has acted on what it was given
    /// and decided to do nothing before `deadline` (a request it sent is already at the server: it waits
    /// for the answer before it sleeps again). What a check that it did *not* send relies on.
    func waitForShipperToWait(until deadline: Duration) async -> Bool {
        await clock.waitForSleeper(until: deadline)
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
        // Its decision at 8.9 s: wait for 5 s of quiet after the last point (4 s), until 9 s.
        #expect(await harness.waitForShipperToWait(until: .seconds(9)))
        #expect(fault.requests.isEmpty, "4.9 s after the last point: still debouncing")
        harness.clock.advance(by: .milliseconds(100))
        #expect(await fault.waitForRequests(1))
        #expect(harness.storedIndices == [0, 1])

        // Steady traffic every 3 s never leaves 5 s of quiet: the maximum age (12 s) sends it.
        for second in stride(from: 0, to: 12, by: 3) {
            harness.write(1, from: 10 + second)
            harness.clock.advance(by: .seconds(3))
            if second < 9 {
                // The batch opened at 9 s; 5 s after this point comes before its maximum age (21 s).
                let quietEnds = Duration.seconds(9 + second + 5)
                #expect(await harness.waitForShipperToWait(until: quietEnds), "\(second) s: waits for quiet")
                #expect(fault.requests.count == 1, "\(second) s: nothing sent before \(quietEnds)")
            }
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
        let retryAt = harness.clock.now + .seconds(30)
        #expect(await harness.waitForShipperToWait(until: retryAt))
        harness.clock.advance(by: .seconds(29))
        #expect(await harness.waitForShipperToWait(until: retryAt), "still waiting for Retry-After's end")
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
            let retryAt = harness.clock.now + .seconds(wait)
            #expect(await harness.waitForShipperToWait(until: retryAt), "attempt \(attempt + 1) is scheduled")
            harness.clock.advance(by: .seconds(wait - 1))
            #expect(await harness.waitForShipperToWait(until: retryAt), "attempt \(attempt + 1) still waits")
            #expect(fault.requests.count == attempt, "attempt \(attempt + 1) waits \(wait) s")
            harness.clock.advance(by: .seconds(1))
        }
        #expect(await fault.waitForRequests(4))
        #expect(await waitUntil { harness.agent.metrics.pointsWritten == 5 })
        // Acknowledged and gone: no batch is left that could be sent again.
        #expect(harness.agent.metrics.pendingLines == 0)
        #expect(harness.storedIndices == [0, 1, 2, 3, 4], "delivered once")
        #expect(harness.agent.metrics.pointsWritten == 5)
        #expect(harness.agent.metrics.retries == 3)
        #expect(harness.logs.filter { $0.contains("retrying") }.count == 1, "logged once per change of state")
        await harness.finish()
    }

    @Test func tooLargeBatchesAreSplitDownToWhatTheServerTakes() async throws {
        let fault = try await FaultServer.start { _, lines in lines.count > 2 ? .text(413, "too large") : .text(204, "")
        }
        let harness = try ShipperHarness(fault: fault)
        harness.write(10)
        harness.agent.flush()
        // Every piece acknowledged and none left pending: nothing more can be sent.
        #expect(
            await waitUntil {
                harness.storedIndices.count >= 10 && harness.agent.metrics.pointsWritten >= 10
                    && harness.agent.metrics.pendingLines == 0
            }
        )
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
        // The refusal is handled (counted) before more points come.
        #expect(await waitUntil { harness.agent.metrics.pointsRejected == 2 })
        harness.write(2, from: 3)
        harness.agent.flush()
        // One request at a time: the second one is sent only once the first answer was handled (its
        // lines set aside in rejected/, its first line logged).
        #expect(await fault.waitForRequests(2))
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
        #expect(
            UInt64(metrics.pendingLines) + metrics.pointsDropped == 20_000,
            "every point is pending or counted dropped"
        )
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
