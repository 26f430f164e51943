import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing
import Vapor

@testable import APIHealth
@testable import APIHealthVapor

/// What a recorded Vapor client changes in a request (trace headers for a first-party host, nothing
/// else) and what it records beside the response, read from the agent's pending points.
@Suite struct VaporClientPassThroughTests {
    struct FixedTrace: TraceContextSource {
        func traceHeaders() -> TraceHeaders {
            TraceHeaders(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        }
        func currentTraceID() -> String? { "4bf92f3577b34da6a3ce929d0e0e4736" }
    }

    /// An agent that is not started (its points stay pending), propagating traces to `firstPartyHosts`.
    static func agent(firstPartyHosts: [String]?) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "vapor-pass-through")
        configuration.spool = nil
        // A point for every request: each call's point is read.
        configuration.capture.rawPoints = .all
        if let firstPartyHosts {
            configuration.capture.tracePropagation = TracePropagation(
                firstPartyHosts: firstPartyHosts,
                source: FixedTrace()
            )
        }
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "vapor-pass-through"))
    }

    /// The upstream answers with the `traceparent` it was sent and a header of its own.
    static func upstream() async throws -> LoopbackHTTPServer {
        try await LoopbackHTTPServer.start { request in
            .text(200, request.header("traceparent") ?? "none", headers: [("X-Upstream", "7")])
        }
    }

    func requests(_ agent: APIHealthAgent, _ count: Int) async -> [Point] {
        var points: [Point] = []
        _ = await waitUntil {
            points = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
            return points.count >= count
        }
        return points
    }

    @Test func aFirstPartyRequestGetsTraceHeadersAndItsTraceIDIsTheCorrelationID() async throws {
        let agent = try Self.agent(firstPartyHosts: ["127.0.0.1"])
        let api = try await Self.upstream()
        let app = try await Application.make(.testing)
        app.clients.use(.apihealth(agent, module: "users"))

        let traced = try await app.client.get(URI(string: api.baseURL + "/users/7"))
        #expect(traced.body.map { String(buffer: $0) } == FixedTrace().traceHeaders().traceparent)
        #expect(traced.headers.first(name: "X-Upstream") == "7", "the response as the upstream sent it")
        let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let kept = try await app.client.get(URI(string: api.baseURL + "/users/8"), headers: ["traceparent": own])
        #expect(kept.body.map { String(buffer: $0) } == own, "a request's own traceparent is left as it is")

        let points = await requests(agent, 2)
        #expect(
            points.map { $0.field(PointSchema.Field.correlationID) } == [
                .string("4bf92f3577b34da6a3ce929d0e0e4736"), .string("0af7651916cd43dd8448eb211c80319c"),
            ]
        )
        #expect(points.allSatisfy { $0.tag("module") == "users" && $0.tag("path") == "/users/{id}" })
        // The body: the 55 bytes of a traceparent.
        #expect(
            points.allSatisfy { point in
                [FieldValue.uint(55), .int(55)].contains { $0 == point.field(PointSchema.Field.responseBytes) }
            }
        )
        try await app.asyncShutdown()
        try await api.shutdown()
    }

    @Test func anotherHostGetsNoTraceHeaders() async throws {
        let agent = try Self.agent(firstPartyHosts: ["api.example.com"])
        let api = try await Self.upstream()
        let app = try await Application.make(.testing)
        app.clients.use(.apihealth(agent, module: "users"))
        let response = try await app.client.get(URI(string: api.baseURL + "/users/7"))
        #expect(response.body.map { String(buffer: $0) } == "none")
        #expect(await requests(agent, 1).count == 1)
        try await app.asyncShutdown()
        try await api.shutdown()
    }

    @Test func aClientThatIsNotRecordedStaysSoAndARecordedOneChangesModule() async throws {
        let agent = try Self.agent(firstPartyHosts: nil)
        let api = try await Self.upstream()
        let app = try await Application.make(.testing)
        app.clients.use(.http)
        _ = try await app.client.recording(module: "ignored").get(URI(string: api.baseURL + "/users/1"))
        _ = try await app.client.recorded(by: agent, module: "direct").get(URI(string: api.baseURL + "/users/2"))
        app.clients.use(.apihealth(agent, module: "app"))
        let fraud = app.client.recording(module: "fraud")
        _ = try await fraud.recorded(by: agent, module: "once").get(URI(string: api.baseURL + "/users/3"))
        _ = try await fraud.get(URI(string: api.baseURL + "/users/4"))
        let points = await requests(agent, 3)
        #expect(points.map { $0.tag("module") } == ["direct", "once", "fraud"], "each request recorded once")
        try await app.asyncShutdown()
        try await api.shutdown()
    }

    @Test func aRefusedConnectionIsRecordedAsTheOtherClientsRecordIt() async throws {
        let agent = try Self.agent(firstPartyHosts: nil)
        let down = try RefusingPort()
        let app = try await Application.make(.testing)
        app.http.client.configuration.timeout.connect = .seconds(1)
        app.clients.use(.apihealth(agent, module: "users"))
        await #expect(throws: (any Error).self) {
            try await app.client.get(URI(string: down.url.absoluteString + "/users/1"))
        }
        let point = try #require(await requests(agent, 1).first)
        #expect(point.tag("status") == "error")
        #expect(point.field(PointSchema.Field.error) == .string("NSURLErrorDomain \(NSURLErrorCannotConnectToHost)"))
        try await app.asyncShutdown()
        withExtendedLifetime(down) {}
    }
}
