import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

/// The record stage: a sample through the capture filter into its series and its endpoint's
/// aggregate, and a line of its own when it is written raw; and the queue it drains at close.
/// (`recordLater` from the agent's side is `DeferredRecordingTests`'.)
@Suite struct RequestRecorderTests {
    private func makeAgent(
        filter: (@Sendable (RequestSample, SentRequest) -> RequestSample?)? = nil
    ) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "recorder")
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every sample: the tests count them.
        configuration.capture.rawPoints = .all
        configuration.capture.filter = filter
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "recorder"))
    }

    private func sample(_ index: Int) -> RequestSample {
        RequestSample(
            method: "GET",
            url: URL(string: "https://api.example.com/users/\(index)")!,
            module: "recorder",
            startedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index)),
            duration: .milliseconds(3),
            statusCode: 200
        )
    }

    @Test func aRecordedSampleBecomesOneLineOfItsSeries() throws {
        let agent = try makeAgent()
        #expect(agent.recorder.record(sample(1), request: SentRequest(), now: .zero))
        let lines = String(decoding: agent.pending.pendingBytes(), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix("apihealth_request,") == true)
    }

    @Test func aSampleTheFilterDropsIsCountedAndIsNoLoss() throws {
        let agent = try makeAgent(filter: { _, _ in nil })
        #expect(agent.recorder.record(sample(1), request: SentRequest(), now: .zero))
        #expect(agent.pending.currentMetrics.requestsFiltered == 1)
        #expect(agent.pending.currentMetrics.pointsRecorded == 0)
    }

    /// Closing records what waits in the queue, then runs `last` (which may still record), then seals;
    /// a sample queued later is dropped and counted at once.
    @Test func closingRecordsWhatWaitsThenTheLastThenRefusesLaterSamples() throws {
        let agent = try makeAgent()
        for index in 1...3 {
            #expect(
                agent.recorder.recordLater(now: .zero, .sample(sample(index), URLRequest(url: sample(index).url), nil))
            )
        }
        var recordedBeforeLast: UInt64 = 0
        agent.recorder.close {
            recordedBeforeLast = agent.pending.currentMetrics.pointsRecorded
            agent.recorder.record(sample(4), request: SentRequest(), now: .zero)
        }
        #expect(recordedBeforeLast == 3)
        #expect(agent.pending.currentMetrics.pointsRecorded == 4)
        #expect(!agent.recorder.recordLater(now: .zero, .sample(sample(5), URLRequest(url: sample(5).url), nil)))
        #expect(agent.pending.droppedAfterClose == 1)
    }
}
