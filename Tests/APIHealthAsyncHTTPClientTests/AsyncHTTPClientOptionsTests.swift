import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Foundation
import LineProtocol
import Logging
import NIOCore
import TestSupport
import Testing

/// The capture filter, success rules and parse failures, for AsyncHTTPClient requests.
@Suite(.serialized) struct AsyncHTTPClientOptionsTests {
    @Test func theFilterDropsAndRetagsAsyncHTTPClientRequestsAndCountsWhatItDrops() async throws {
        let harness = try await AHCHarness { configuration in
            configuration.capture.filter = { sample, request in
                if request.value(forHTTPHeaderField: "x-synthetic") != nil { return nil }
                var kept = sample
                if let tenant = request.value(forHTTPHeaderField: "X-Tenant") { kept.module = tenant }
                kept.correlationID = nil
                return kept
            }
        }
        var synthetic = HTTPClientRequest(url: harness.url("/ok"))
        synthetic.headers.add(name: "X-Synthetic", value: "1")
        var tenant = HTTPClientRequest(url: harness.url("/ok"))
        tenant.headers.add(name: "X-Tenant", value: "billing")
        let plain = HTTPClientRequest(url: harness.url("/status/404"))
        for request in [synthetic, tenant, plain] {
            #expect(await harness.run(request, instrumented: true).status != nil)
        }
        #expect(await waitUntil { harness.agent.metrics.requestsFiltered == 1 })
        let points = harness.requests()
        #expect(points.map { $0.tag("module") } == ["billing", "ahc"])
        #expect(points.allSatisfy { $0.field("correlation_id") == nil }, "/ok answers with an X-Request-Id")
        let metrics = harness.agent.metrics
        #expect(metrics.pointsRecorded == 2 && metrics.pointsDropped == 0 && metrics.pointsLost == 0)
        await harness.close()
    }

    @Test func aStatusTheRulesCallASuccessIsWrittenAsOne() async throws {
        let harness = try await AHCHarness { $0.capture.successRules = [.success(404, path: "/status/{id}")] }
        _ = await harness.run(HTTPClientRequest(url: harness.url("/status/404")), instrumented: true)
        _ = await harness.run(HTTPClientRequest(url: harness.url("/nothing/here")), instrumented: true)
        let points = try await harness.waitForRequests(2)
        #expect(points.map { $0.tag("path") } == ["/status/{id}", "/nothing/here"])
        #expect(points.map { $0.field("success") } == [.bool(true), .bool(false)])
        #expect(points.map { $0.field("errors") } == [.int(0), .int(1)])
        await harness.close()
    }

    private struct User: Decodable {
        var id: Int
        var name: String
    }

    /// A body AsyncHTTPClient read that does not decode becomes a parse-failure point, shipped to a real
    /// VictoriaMetrics and read back with its endpoint's tags.
    @Test func decodeRecordsAParseFailureThatReachesVictoriaMetrics() async throws {
        let victoria = try VictoriaMetrics()
        let module = "ahc_parse_\(UInt32.random(in: 0...UInt32.max))"
        let harness = try await AHCHarness { configuration in
            configuration.destination = InfluxDestination(url: victoria.base, api: .v2(organization: "o", bucket: "b"))
            configuration.batching.flushDelay = .milliseconds(50)
        }
        harness.agent.start()
        let missing = HTTPClientRequest(url: harness.url("/json/missing"))
        let response = try await harness.client.execute(
            missing,
            timeout: .seconds(60),
            recordingTo: harness.agent,
            module: module
        )
        let body = try await response.body.collect(upTo: 1 << 20)
        #expect(throws: DecodingError.self) {
            try harness.agent.decode(User.self, from: body, for: missing, response: response, module: module)
        }
        let page = HTTPClientRequest(url: harness.url("/json/page"))
        let pageResponse = try await harness.client.execute(page, timeout: .seconds(60))
        let pageBody = try await pageResponse.body.collect(upTo: 1 << 20)
        do {
            _ = try JSONDecoder().decode(User.self, from: Data(pageBody.readableBytesView))
        } catch {
            harness.agent.recordParseFailure(
                for: page,
                response: pageResponse,
                error: error,
                module: module,
                body: pageBody
            )
        }
        #expect(await harness.agent.flush(waitingUpTo: .seconds(60)))
        var series: [VictoriaMetrics.Series] = []
        _ = try await waitUntil {
            series = try await victoria.export(namePattern: "apihealth_parse_failure_count").filter {
                $0.labels["module"] == module
            }
            return series.count >= 2
        }
        let byFailure = Dictionary(
            series.map { ($0.labels["failure"] ?? "?", $0) },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(Set(byFailure.keys) == ["keyNotFound", "notJSON"])
        let keyNotFound = try #require(byFailure["keyNotFound"])
        #expect(keyNotFound.labels["path"] == "/json/missing")
        #expect(keyNotFound.labels["method"] == "GET")
        #expect(keyNotFound.labels["status"] == "200")
        #expect(keyNotFound.labels["host"] == "127.0.0.1:\(harness.server.port)")
        #expect(keyNotFound.values == [1])
        #expect(byFailure["notJSON"]?.labels["path"] == "/json/page")
        await harness.agent.shutdown(deadline: .seconds(30))
        await harness.close()
    }
}
