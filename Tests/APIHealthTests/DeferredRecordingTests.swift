import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

/// A request that builds its sample with `build` when the record loop records it.
private final class BuiltLater: EndedRequestSource {
    let build: @Sendable () -> RequestSample?
    init(_ build: @escaping @Sendable () -> RequestSample?) { self.build = build }
    func makeSample(correlationHeaders: [String]) -> RequestSample? { build() }
    func requestHeader(_ name: String) -> String? { nil }
}

extension APIHealthAgent {
    fileprivate func recordLater(_ build: @escaping @Sendable () -> RequestSample?) {
        recordLater(BuiltLater(build))
    }
}

/// `recordLater`: samples built and encoded off the caller's path, and never lost or seen late.
@Suite struct DeferredRecordingTests {
    private func makeAgent(spool: URL? = nil) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "deferred")
        configuration.spool = spool.map { SpoolOptions(directory: $0) }
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every sample: the tests count them.
        configuration.capture.rawPoints = .all
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "deferred"))
    }

    private func sample(_ index: Int) -> RequestSample {
        RequestSample(
            method: "GET",
            url: URL(string: "https://api.example.com/users/\(index)")!,
            module: "deferred",
            startedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index) / 1_000),
            duration: .milliseconds(3),
            statusCode: 200
        )
    }

    /// The capture filter is the user's code: a drain holds no lock while it runs, so a filter that
    /// reads the agent (whose metrics drain first) deadlocks neither that drain nor shutdown's last one.
    /// Each is run off the test's thread and waited for, so a deadlock fails the test.
    @Test func aFilterThatReadsTheAgentDeadlocksNeitherADrainNorShutdown() async throws {
        let agentBox = Locked<APIHealthAgent?>(nil)
        let seen = Locked<[UInt64]>([])
        var configuration = APIHealthConfiguration(serviceName: "deferred")
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every sample: the filter reads how many were recorded.
        configuration.capture.rawPoints = .all
        configuration.capture.filter = { sample, _ in
            if let agent = agentBox.withLock({ $0 }) {
                let recorded = agent.metrics.pointsRecorded
                seen.withLock { $0.append(recorded) }
            }
            return sample
        }
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "deferred"))
        agentBox.withLock { $0 = agent }
        agent.recordLater { sample(1) }
        agent.recordLater { sample(2) }

        let recorded = Locked<UInt64?>(nil)
        Thread.detachNewThread { recorded.withLock { $0 = agent.metrics.pointsRecorded } }
        #expect(await waitUntil { recorded.withLock { $0 } != nil }, "the drain deadlocked on its own filter")
        #expect(recorded.withLock { $0 } == 2)
        #expect(seen.withLock { $0 } == [0, 1], "the filter sees what was recorded before it")

        agent.recordLater { sample(3) }
        let shutDown = Locked(false)
        Thread.detachNewThread {
            let ended = DispatchSemaphore(value: 0)
            Task {
                await agent.shutdown(deadline: .seconds(5))
                ended.signal()
            }
            ended.wait()
            shutDown.withLock { $0 = true }
        }
        #expect(await waitUntil { shutDown.withLock { $0 } }, "shutdown deadlocked on the filter")
        #expect(seen.withLock { $0.count } == 3, "the last drain ran the filter")
        #expect(agent.metrics.pointsDropped == 0)
        agentBox.withLock { $0 = nil }
    }

    @Test func aSampleIsBuiltAtTheDrainAndEveryReaderSeesIt() throws {
        let agent = try makeAgent()
        let built = Locked(0)
        agent.recordLater {
            built.withLock { $0 += 1 }
            return sample(1)
        }
        #expect(built.withLock { $0 } == 0, "built on the caller's path")
        #expect(agent.metrics.pointsRecorded == 1)
        #expect(built.withLock { $0 } == 1)
        #expect(agent.pendingPoints().count == 1)
        #expect(built.withLock { $0 } == 1, "built twice")
    }

    @Test func aReadySampleWaitsForTheDrainToo() throws {
        let agent = try makeAgent()
        agent.recordLater(sample(1), request: URLRequest(url: sample(1).url))
        agent.recordLater(sample(2), request: URLRequest(url: sample(2).url))
        let points = agent.pendingPoints()
        #expect(points.count == 2)
        #expect(points.map(\.timestamp) == [sample(1), sample(2)].map { Timestamp(date: $0.startedAt) })
    }

    /// No recording thread builds or records a sample, however many it queues: the record loop does,
    /// on its own thread, whether the samples came captured or through `record(_:)`.
    @Test func onlyTheRecordLoopBuildsAndRecordsSamples() throws {
        let threads = Locked<[String]>([])
        let agentBox = Locked<APIHealthAgent?>(nil)
        @Sendable func thread() -> String {
            agentBox.withLock { $0 }?.recorder.intake.isOnLoopThread == true ? "the record loop" : "another"
        }
        var configuration = APIHealthConfiguration(serviceName: "deferred")
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        configuration.capture.rawPoints = .all
        configuration.capture.filter = { sample, _ in
            threads.withLock { $0.append("filter " + thread()) }
            return sample
        }
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "deferred"))
        agentBox.withLock { $0 = agent }
        let count = RecordIntake.wakeAt * 2 + 1
        for index in 0..<count {
            if index.isMultiple(of: 2) {
                agent.recordLater {
                    threads.withLock { $0.append("build " + thread()) }
                    return sample(index)
                }
            } else {
                agent.record(sample(index))
            }
        }
        #expect(agent.metrics.pointsRecorded == UInt64(count))
        let seen = threads.withLock { $0 }
        #expect(seen.count == count + (count + 1) / 2)
        #expect(Set(seen) == ["filter the record loop", "build the record loop"])
        agentBox.withLock { $0 = nil }
    }

    @Test func aRunningAgentDrainsWithoutBeingAsked() async throws {
        let spool = temporaryDirectory("deferred")
        defer { try? FileManager.default.removeItem(at: spool) }
        let agent = try makeAgent(spool: spool)
        agent.start()
        let built = Locked(0)
        agent.recordLater {
            built.withLock { $0 += 1 }
            return sample(1)
        }
        // Under a loaded test run the agent's loops may wait long for a thread: eventTimeout is generous.
        _ = await waitUntil { built.withLock { $0 } > 0 }
        #expect(built.withLock { $0 } == 1, "the running agent's loops did not drain")
        await agent.shutdown()
    }

    @Test func shutdownRecordsWhatWasDeferredAndCountsLaterSamplesAsDropped() async throws {
        let spool = temporaryDirectory("deferred")
        defer { try? FileManager.default.removeItem(at: spool) }
        let agent = try makeAgent(spool: spool)
        for index in 0..<10 { agent.recordLater { sample(index) } }
        await agent.shutdown()
        #expect(
            agent.metrics.pointsRecorded == 12,
            "10 samples, their endpoint's interval point and the last health point"
        )
        let built = Locked(0)
        agent.recordLater {
            built.withLock { $0 += 1 }
            return sample(11)
        }
        #expect(agent.metrics.pointsDropped == 1)
        #expect(built.withLock { $0 } == 0, "a sample queued after shutdown was built")
        let lines = try SpoolReader(directory: spool).segments().flatMap(\.lines).map {
            String(decoding: $0, as: UTF8.self)
        }
        #expect(lines.filter { $0.hasPrefix("apihealth_request,") }.count == 10)
    }

    @Test func aSampleThatCannotBeBuiltRecordsNothing() throws {
        let agent = try makeAgent()
        agent.recordLater { nil }
        #expect(agent.metrics.pointsRecorded == 0 && agent.metrics.pointsInvalid == 0)
    }
}
