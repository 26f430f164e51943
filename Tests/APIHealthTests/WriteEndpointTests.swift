import Foundation
import LineProtocol
import Logging
import APIHealthTestKit
import TestSupport
import Testing

@testable import APIHealth

/// The write endpoints besides InfluxDB 2's: InfluxDB 3's own API with its partial writes (no
/// InfluxDB 3 runs here: the fault server answers as InfluxDB 3's documentation shows), cluster base
/// paths, and what a fleet sets on its requests.
@Suite struct WriteEndpointTests {
    @Test func aBasePathStaysInFrontOfEveryWritePath() {
        let base = URL(string: "http://vminsert:8480/insert/0/influx")!
        #expect(
            InfluxDestination(url: base, api: .v2(organization: "o", bucket: "b")).writeURL(precision: .ms)
                .absoluteString
                == "http://vminsert:8480/insert/0/influx/api/v2/write?org=o&bucket=b&precision=ms"
        )
        #expect(
            InfluxDestination(url: base, api: .v1(database: "db")).writeURL(precision: .us).absoluteString
                == "http://vminsert:8480/insert/0/influx/write?db=db&precision=u"
        )
        #expect(
            InfluxDestination(url: URL(string: "http://influx:8181/")!, api: .v3(database: "apis")).writeURL(
                precision: .ns
            )
            .absoluteString == "http://influx:8181/api/v3/write_lp?db=apis&precision=nanosecond&accept_partial=true"
        )
    }

    @Test func anInfluxDB3PartialWriteKeepsTheStoredLinesAndSetsAsideEachRefusedOne() async throws {
        // The body InfluxDB 3 documents for accept_partial=true, refusing lines 2 and 4.
        let fault = try await FaultServer.start { index, lines in
            guard index == 0 else { return .text(204, "") }
            let refused = [2, 4].map { number in
                #"{"original_line":"\#(lines[number - 1].replacingOccurrences(of: "\"", with: "\\\""))","line_number":\#(number),"error_message":"invalid column type for column 'v', expected iox::column_type::field::float, got iox::column_type::field::integer"}"#
            }
            return .json(
                400,
                #"{"error":"partial write of line protocol occurred","data":[\#(refused.joined(separator: ","))]}"#
            )
        }
        let harness = try ShipperHarness(fault: fault, api: .v3(database: "apis"))
        harness.write(6)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        let uri = try #require(fault.requestURIs.first)
        #expect(uri == "/api/v3/write_lp?db=apis&precision=nanosecond&accept_partial=true")
        #expect(await waitUntil { harness.agent.metrics.pointsRejected == 2 })
        let metrics = harness.agent.metrics
        #expect(metrics.pointsWritten == 4, "the lines the server took count as written")
        #expect(metrics.pointsRejected == 2, "each refused line is counted")
        #expect(metrics.pendingLines == 0)
        // The refused lines are counted under the batching lock, then set aside in rejected/ outside it.
        #expect(await waitUntil { (try? SpoolReader(directory: harness.spool).rejected().count) == 1 })
        let rejected = try SpoolReader(directory: harness.spool).rejected()
        #expect(rejected.count == 1)
        let kept = rejected.first.map { $0.lines.map { String(decoding: $0, as: UTF8.self) } } ?? []
        #expect(kept.count == 2 && kept[0].hasPrefix("test,n=1 ") && kept[1].hasPrefix("test,n=3 "), "\(kept)")
        #expect(rejected.first?.reason.contains("line 2: invalid column type") == true)
        #expect(rejected.first?.reason.contains("line 4: invalid column type") == true)
        await harness.finish()
    }

    @Test func aFleetsHeadersAndAPlainBodyGoOutAsConfigured() async throws {
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault) { configuration in
            configuration.destinations[0].headers = ["X-Scope-OrgID": "team-1"]
            configuration.destinations[0].compression = .identity
        }
        harness.write(3)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        let headers = try #require(fault.requestHeaders.first)
        #expect(headers["x-scope-orgid"] == "team-1")
        #expect(headers["content-encoding"] == nil, "identity: the body is plain line protocol")
        #expect(fault.requests.first?.count == 3)
        await harness.finish()
    }

    @Test func aDestinationWithACoarserPrecisionGetsItsTimestampsRewritten() async throws {
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let harness = try ShipperHarness(fault: fault) { configuration in
            configuration.destinations[0].precision = .ms
        }
        harness.write(2)
        harness.agent.flush()
        #expect(await fault.waitForRequests(1))
        #expect(fault.requestURIs.first?.hasSuffix("precision=ms") == true)
        // 1_700_000_000_000_000_000 + n nanoseconds: the same millisecond.
        #expect(fault.requests.first?.allSatisfy { $0.hasSuffix(" 1700000000000") } == true, "\(fault.requests)")
        #expect(
            PrecisionRewrite.rewrite(Array("m v=1i -1500\nm v=2i 2999\n".utf8), from: .us, to: .ms)
                == Array("m v=1i -2\nm v=2i 2\n".utf8),
            "rounded down, before 1970 too"
        )
        await harness.finish()
    }

    @Test func aBatchFailingAtOneURLOfTheGroupGoesByteForByteToTheNext() async throws {
        let failing = try await FaultServer.start { _, _ in .text(503, "overloaded") }
        let working = try await FaultServer.start { _, _ in .text(204, "") }
        var bodies: [[String]] = []
        let harness = try ShipperHarness(fault: working) { configuration in
            configuration.destinations[0].urls = [failing.url, working.url]
        }
        harness.write(50)
        harness.agent.flush()
        #expect(await waitUntil { harness.agent.metrics.pointsWritten == 50 })
        bodies = working.requests
        #expect(bodies.count == 1)
        if !failing.requests.isEmpty { #expect(failing.requests[0] == bodies[0], "the same lines, in the same order") }
        #expect(harness.storedIndices == Array(0..<50))
        await harness.finish()
        await failing.shutdown()
    }
}
