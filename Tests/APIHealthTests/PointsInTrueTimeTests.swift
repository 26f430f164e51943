import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Points recorded on a device's clock before its offset is known move to true time once it is, while they
/// are pending; those already gone are counted.
@Suite struct PointsInTrueTimeTests {
    private static let twoHours: Int64 = 7_200_000_000_000

    private func shifted(
        _ text: String,
        bytes: Int? = nil,
        nanoseconds: Int64 = -twoHours,
        _ precision: Precision
    )
        -> String
    {
        let lines = Array(text.utf8)
        let shift = TimestampShift(bytes: bytes ?? lines.count, nanoseconds: nanoseconds, precision: precision)
        return String(decoding: shift.apply(to: lines), as: UTF8.self)
    }

    @Test func eachLinesTimestampMovesInItsPrecision() {
        #expect(shifted("m v=1i 1700007200000000000\n", .ns) == "m v=1i 1700000000000000000\n")
        #expect(shifted("m v=1i 1700007200000000\n", .us) == "m v=1i 1700000000000000\n")
        #expect(shifted("m v=1i 1700007200000\n", .ms) == "m v=1i 1700000000000\n")
        #expect(shifted("m v=1i 1700007200\n", .s) == "m v=1i 1700000000\n")
        // An offset that is no whole unit is rounded down to one.
        #expect(shifted("m v=1i 10\n", nanoseconds: -1_500_000_000, .s) == "m v=1i 8\n")
        #expect(shifted("m v=1i 10\n", nanoseconds: 1_500_000_000, .s) == "m v=1i 11\n")
        // Before 1970, and across it.
        #expect(shifted("m v=1i 5\n", nanoseconds: -10_000, .us) == "m v=1i -5\n")
        #expect(shifted("m v=1i -5\n", nanoseconds: 10_000, .us) == "m v=1i 5\n")
        // The last line without its newline, and digits that change in number.
        #expect(shifted("m v=1i 999\nm v=2i 1000", nanoseconds: 1_000, .ns) == "m v=1i 1999\nm v=2i 2000")
    }

    @Test func linesWithEscapedContentMoveOnlyTheirTimestamp() {
        let line =
            #"m\ x\,y,host=a\ b\=c,path=/graphql/{anonymous} s="a \"q\" 12 \\",t="x\#ny 1700007200000",v=1i 1700007200000"#
        let moved =
            #"m\ x\,y,host=a\ b\=c,path=/graphql/{anonymous} s="a \"q\" 12 \\",t="x\#ny 1700007200000",v=1i 1700000000000"#
        #expect(shifted(line + "\n" + line + "\n", .ms) == moved + "\n" + moved + "\n")
    }

    @Test func linesWithoutATimestampOrPastInt64StayAsTheyAre() {
        #expect(shifted("m v=1i\n", .ns) == "m v=1i\n")
        #expect(shifted(#"m s="a 12""# + "\n", .ns) == #"m s="a 12""# + "\n")
        #expect(shifted(#"m,t=a\ 12 v=1i"# + "\n", .ns) == #"m,t=a\ 12 v=1i"# + "\n")
        let late = "m v=1i 9223372036854775000\n"
        #expect(shifted(late, nanoseconds: 10_000, .ns) == late, "would pass Int64.max")
        let early = "m v=1i -9223372036854775000\n"
        #expect(shifted(early, nanoseconds: -10_000, .ns) == early, "would pass Int64.min")
        #expect(shifted("m v=1i 12345678901234567890123\n", .ns) == "m v=1i 12345678901234567890123\n")
    }

    @Test func onlyTheLinesStampedBeforeTheOffsetMove() {
        let before = "m v=1i 1700007200000\n"
        let after = "m v=2i 1700000000500\n"
        #expect(
            shifted(before + after + before, bytes: before.utf8.count, .ms) == "m v=1i 1700000000000\n" + after + before
        )
        #expect(shifted(before, bytes: 0, .ms) == before)
    }

    /// The batching state alone: when the offset is learned, the open batch and a sealed one whose body was made
    /// (its lines still held) move their lines, the body made again; the batch being sent does not, and is
    /// counted; lines recorded after are left as they are; a body made of unmoved lines that comes back late is
    /// not kept.
    @Test func theOffsetMovesWhatIsPendingAndCountsWhatIsBeingSent() throws {
        var limits = APIHealthConfiguration.Batching()
        limits.maximumLines = 2
        var state = BatchingState(limits: limits, precision: .ms, hasSpool: true, destinationCaps: [1 << 20])
        func record(_ text: String) {
            let bytes = Array((text + "\n").utf8)
            let accepted = bytes.withUnsafeBufferPointer {
                state.record(EncodedLine(bytes: $0, seriesKeyBytes: 1, timestamp: nil), series: 0, now: .zero).accepted
            }
            #expect(accepted)
        }
        func lines(_ index: Int) -> String {
            String(decoding: state.batches[index].contents.lines() ?? [], as: UTF8.self)
        }
        for value in 1...5 { record("m v=\(value)i 170000720000\(value)") }
        #expect(state.batches.count == 3 && state.batches[2].isSealed == false)
        guard
            case .send(let sending, _, _, _) = state.handle(
                .sendWanted(DestinationID(index: 0), now: .zero, openDeadline: nil)
            ).work
        else {
            Issue.record("the first batch is not sent")
            return
        }
        #expect(sending == state.batches[0].segment)
        guard case .makeBody(let waiting, let unmoved, nil) = state.handle(.waitingBodyWanted).work else {
            Issue.record("no body wanted for the second batch")
            return
        }
        #expect(waiting == state.batches[1].segment)
        let early = Array("early body".utf8)
        _ = state.handle(.bodyMade(segment: waiting, body: early, linesClamped: 0))
        #expect(state.batches[1].body == early)

        _ = state.handle(.offsetLearned(nanoseconds: -7_200_000_000_000))
        _ = state.handle(.offsetLearned(nanoseconds: 5_000_000_000))
        record("m v=6i 1700000000006")
        #expect(lines(0) == "m v=1i 1700007200001\nm v=2i 1700007200002\n", "being sent: as it went")
        #expect(lines(1) == "m v=3i 1700000000003\nm v=4i 1700000000004\n")
        #expect(lines(2) == "m v=5i 1700000000005\nm v=6i 1700000000006\n", "the line after the offset as it is")
        #expect(state.batches[1].body == nil, "the body made before is made again")
        #expect(state.currentMetrics.pointsOnDeviceClock == 2)

        _ = state.handle(.bodyMade(segment: waiting, body: Array(unmoved), linesClamped: 0))
        #expect(state.batches[1].body == nil, "a body of unmoved lines is not kept")
        guard case .makeBody(_, let held, let shift?) = state.handle(.bodyWanted(segment: waiting)).work else {
            Issue.record("the body is not made with the shift")
            return
        }
        let moved = shift.apply(to: held)
        #expect(String(decoding: moved, as: UTF8.self) == lines(1))
        _ = state.handle(.bodyMade(segment: waiting, body: moved, linesClamped: 0, restamped: true))
        #expect(state.batches[1].body == moved)
    }

    /// An API that answers `/dated` with a true `Date` and `/plain` with none.
    static func api() async throws -> LoopbackHTTPServer {
        try await LoopbackHTTPServer.start { request in
            guard request.path == "/dated" else { return .json(200, "{}") }
            return .json(200, "{}", headers: [("Date", DeviceClockTests.httpDate(secondsFromNow: 0))])
        }
    }

    /// A phone two hours fast with no destination: its first points are pending on its clock, two hours
    /// ahead, until three answers agree; then every one of them reads true time.
    @Test func pendingPointsMoveToTrueTimeWhenTheOffsetIsLearned() async throws {
        let api = try await Self.api()
        var configuration = APIHealthConfiguration(serviceName: "true_time", destination: nil)
        configuration.spool = nil
        configuration.correctsClock = true
        configuration.capture.rawPoints = .all
        // Batches of two lines: sealed batches move as the open one does.
        configuration.batching.maximumLines = 2
        configuration.aggregation = nil
        configuration.selfMetricsInterval = .seconds(3_600)
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "true-time"),
            clock: ShiftedWallClock(ahead: .seconds(7_200))
        )
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "app")
        let session = URLSession(configuration: sessionConfiguration)
        for index in 0..<3 { _ = try await session.data(from: URL(string: "\(api.baseURL)/plain?i=\(index)")!) }
        func requestStamps() -> [Double] {
            agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
                .compactMap { $0.timestamp.map { Double($0.nanosecondsSinceEpoch) / 1e9 } }
        }
        let ahead = requestStamps()
        #expect(ahead.count == 3)
        #expect(ahead.allSatisfy { abs($0 - Date().timeIntervalSince1970 - 7_200) < 10 }, "\(ahead)")
        #expect(agent.metrics.pointsOnDeviceClock == 3, "no offset yet")
        for index in 0..<3 { _ = try await session.data(from: URL(string: "\(api.baseURL)/dated?i=\(index)")!) }
        let metrics = agent.metrics
        let offset = try #require(metrics.clockOffset)
        #expect(abs(offset.secondsDouble + 7_200) < 2, "offset \(offset)")
        let stamps = requestStamps()
        let trueNow = Date().timeIntervalSince1970
        #expect(stamps.count == 6)
        let tolerance = (metrics.clockOffsetUncertainty?.secondsDouble ?? 3) + 5
        #expect(stamps.allSatisfy { abs($0 - trueNow) < tolerance }, "\(stamps) against \(trueNow)")
        #expect(
            stamps.allSatisfy { $0 <= trueNow + (metrics.clockOffsetUncertainty?.secondsDouble ?? 3) },
            "none ahead"
        )
        #expect(metrics.pointsOnDeviceClock == 0)
        await agent.shutdown(deadline: .seconds(5))
        try await api.shutdown()
    }

    /// The same phone, shipping to a real InfluxDB 1.x: what it recorded before the API's answers agreed
    /// is stored in true time; then a batch sent before any reading, on its clock, is counted, and the
    /// destination's answer to it corrects the points after it.
    @Test func pointsRecordedBeforeTheOffsetLandInTrueTimeInInfluxDB1() async throws {
        let influx = try await InfluxDB1.freshDatabase("true_time")
        let api = try await Self.api()
        func agent(_ service: String, flushDelay: Duration) throws -> APIHealthAgent {
            var configuration = APIHealthConfiguration(
                serviceName: service,
                destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
            )
            configuration.spool = nil
            configuration.correctsClock = true
            configuration.capture.rawPoints = .all
            configuration.precision = .ms
            configuration.batching.flushDelay = flushDelay
            configuration.batching.maximumAge = .seconds(600)
            configuration.batching.flushJitter = .zero
            // Only the requests' points, so that what went out on the phone's clock is known exactly.
            configuration.aggregation = nil
            configuration.selfMetricsInterval = .seconds(3_600)
            return try APIHealthAgent(
                configuration: configuration,
                logger: Logger(label: service),
                clock: ShiftedWallClock(ahead: .seconds(7_200))
            )
        }
        func call(_ session: URLSession, _ path: String, _ count: Int) async throws {
            for index in 0..<count {
                _ = try await session.data(from: URL(string: "\(api.baseURL)\(path)?i=\(index)")!)
            }
        }
        func stamps(_ service: String) async throws -> [Double] {
            let rows =
                try await influx.query(
                    #"SELECT "duration_ms" FROM "apihealth_request" WHERE "service" = '\#(service)'"#
                )
                .first?.rows ?? []
            return rows.compactMap { ($0["time"] as? NSNumber).map { $0.doubleValue / 1e9 } }
        }

        // Nothing is sent before the offset is known: three points on the phone's clock, then three answers
        // that agree. Every point reaches InfluxDB in true time.
        let pending = try agent("pending", flushDelay: .seconds(600))
        pending.start()
        let pendingSession = URLSessionConfiguration.ephemeral
        pending.instrument(pendingSession, module: "app")
        let first = URLSession(configuration: pendingSession)
        try await call(first, "/plain", 3)
        try await call(first, "/dated", 3)
        let trueNow = Date().timeIntervalSince1970
        await pending.shutdown(deadline: .seconds(60))
        let pendingMetrics = pending.metrics
        #expect(pendingMetrics.pendingLines == 0 && pendingMetrics.pointsWritten >= 6)
        #expect(pendingMetrics.pointsOnDeviceClock == 0)
        let tolerance = (pendingMetrics.clockOffsetUncertainty?.secondsDouble ?? 3) + 5
        var stored: [Double] = []
        _ = try await waitUntil {
            stored = try await stamps("pending")
            return stored.count >= 6
        }
        #expect(stored.count == 6)
        #expect(stored.allSatisfy { abs($0 - trueNow) < tolerance }, "\(stored) against \(trueNow)")

        // A batch sent before any reading goes on the phone's clock, two hours ahead, and is counted; the
        // destination's answer is the reading that corrects what follows.
        let sent = try agent("sent", flushDelay: .milliseconds(20))
        sent.start()
        let sentSession = URLSessionConfiguration.ephemeral
        sent.instrument(sentSession, module: "app")
        let second = URLSession(configuration: sentSession)
        try await call(second, "/plain", 2)
        #expect(await sent.flush(waitingUpTo: .seconds(60)))
        #expect(await waitUntil { sent.metrics.clockOffset != nil }, "the destination's answer is a reading")
        try await call(second, "/plain", 2)
        let later = Date().timeIntervalSince1970
        await sent.shutdown(deadline: .seconds(60))
        #expect(sent.metrics.pointsOnDeviceClock == 2)
        var both: [Double] = []
        _ = try await waitUntil {
            both = try await stamps("sent")
            return both.count >= 4
        }
        #expect(both.filter { abs($0 - later - 7_200) < 30 }.count == 2, "sent on the phone's clock: \(both)")
        #expect(both.filter { abs($0 - later) < tolerance }.count == 2, "in true time: \(both)")
        try await api.shutdown()
    }
}
