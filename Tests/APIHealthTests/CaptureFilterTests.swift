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

/// `capture.filter`: drop, redact or re-tag a request's sample before it becomes a point.
@Suite(.serialized) struct CaptureFilterTests {
    /// Drops requests marked synthetic, re-tags a tenant's requests with its module, and redacts
    /// correlation ids and the path of `/json/…` requests.
    static let filter: @Sendable (RequestSample, SentRequest) -> RequestSample? = { sample, request in
        if request.value(forHTTPHeaderField: "x-synthetic") != nil { return nil }
        var kept = sample
        if let tenant = request.value(forHTTPHeaderField: "X-Tenant") { kept.module = tenant }
        if sample.url.path.hasPrefix("/json/") {
            var components = URLComponents(url: sample.url, resolvingAgainstBaseURL: false)!
            components.path = "/json/redacted"
            kept.url = components.url!
        }
        kept.correlationID = nil
        return kept
    }

    @Test func theFilterDropsRedactsAndRetagsURLSessionRequestsAndCountsWhatItDrops() async throws {
        let harness = try await CaptureHarness { $0.capture.filter = Self.filter }
        var synthetic = URLRequest(url: harness.url("/ok"))
        synthetic.setValue("1", forHTTPHeaderField: "X-Synthetic")
        var tenant = URLRequest(url: harness.url("/ok"))
        tenant.setValue("billing", forHTTPHeaderField: "X-Tenant")
        let secret = URLRequest(url: harness.url("/json/user"))
        var statuses: [Int] = []
        for request in [synthetic, tenant, secret] {
            let (_, response) = try await harness.instrumented.data(for: request)
            statuses.append((response as! HTTPURLResponse).statusCode)
        }
        #expect(statuses == [200, 200, 200], "the app sees every response")
        #expect(await waitUntil { harness.agent.metrics.requestsFiltered == 1 })
        let points = harness.requests()
        #expect(points.count == 2)
        #expect(points.map { $0.tag("module") } == ["billing", "tests"])
        #expect(points.map { $0.tag("path") } == ["/ok", "/json/redacted"])
        #expect(points.allSatisfy { $0.field("correlation_id") == nil }, "/ok answers with an X-Request-Id")
        let metrics = harness.agent.metrics
        #expect(metrics.pointsRecorded == 2)
        #expect(metrics.pointsDropped == 0 && metrics.pointsLost == 0 && metrics.pointsInvalid == 0)
        #expect(await harness.arrivals.wait(for: "/json/user"))
        await harness.close()
    }

    @Test func theFilterSeesTheRequestURLSessionSent() async throws {
        let seen = Locked([String]())
        let harness = try await CaptureHarness { configuration in
            configuration.capture.filter = { sample, request in
                seen.withLock {
                    $0.append(
                        "\(request.urlRequest?.url == sample.url) \(request.value(forHTTPHeaderField: "x-token") ?? "-")"
                    )
                }
                return sample
            }
        }
        var request = URLRequest(url: harness.url("/headers"))
        request.setValue("abc", forHTTPHeaderField: "X-Token")
        _ = try await harness.instrumented.data(for: request)
        _ = try await harness.waitForRequests(1)
        #expect(seen.withLock { $0 } == ["true abc"])
        await harness.close()
    }

    @Test func aSampleHandedToRecordPassesTheFilterWithoutHeaders() throws {
        let seen = Locked([String]())
        var configuration = APIHealthConfiguration(serviceName: "filter")
        configuration.spool = nil
        // A point for every sample kept: the test reads which were.
        configuration.capture.rawPoints = .all
        configuration.capture.filter = { sample, request in
            seen.withLock {
                $0.append("\(request.urlRequest == nil) \(request.value(forHTTPHeaderField: "Host") ?? "-")")
            }
            return sample.module == "drop" ? nil : sample
        }
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "filter"))
        for module in ["keep", "drop"] {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.example.com/x")!,
                    module: module,
                    startedAt: Date(),
                    duration: .milliseconds(1),
                    statusCode: 200
                )
            )
        }
        #expect(agent.metrics.requestsFiltered == 1)
        #expect(seen.withLock { $0 } == ["true -", "true -"])
        #expect(agent.pendingPoints().map { $0.tag("module") } == ["keep"])
    }

    @Test func theHealthPointCountsFilteredRequestsApartFromLosses() throws {
        var metrics = AgentMetrics()
        metrics.requestsFiltered = 3
        let configuration = APIHealthConfiguration(serviceName: "filter")
        let point = AgentHealthPoint.make(
            metrics,
            tags: configuration.everyPointTags,
            configuration: configuration
        )
        #expect(point.field(PointSchema.AgentField.requestsFiltered) == .uint(3))
        #expect(point.field(PointSchema.AgentField.pointsLost) == .uint(0))
        #expect(point.field(PointSchema.AgentField.pointsDropped) == .uint(0))
    }
}
