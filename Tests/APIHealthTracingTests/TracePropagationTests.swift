import APIHealthAsyncHTTPClient
import APIHealthTestKit
import APIHealthTracing
import AsyncHTTPClient
import Foundation
import InMemoryTracing
import Instrumentation
import LineProtocol
import Logging
import NIOCore
import TestSupport
import Testing
import Tracing
import W3CTraceContext

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The span context a W3C propagator keeps in a `ServiceContext`.
private enum SpanContextKey: ServiceContextKey {
    typealias Value = TraceContext
}

/// Reads and writes `traceparent`/`tracestate` to and from a `ServiceContext`, as a tracer's W3C
/// propagator does.
private struct W3CInstrument: Instrument {
    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier,
        into context: inout ServiceContext,
        using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let parent = extractor.extract(key: "traceparent", from: carrier),
            let trace = try? TraceContext(
                traceParentHeaderValue: parent,
                traceStateHeaderValue: extractor.extract(key: "tracestate", from: carrier)
            )
        else { return }
        context[SpanContextKey.self] = trace
    }

    func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext,
        into carrier: inout Carrier,
        using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let trace = context[SpanContextKey.self] else { return }
        injector.inject(trace.traceParentHeaderValue, forKey: "traceparent", into: &carrier)
        if let state = trace.traceStateHeaderValue { injector.inject(state, forKey: "tracestate", into: &carrier) }
    }
}

/// What the server saw of each request: its path and every value of the headers the tests look at.
private final class HeaderLog: Sendable {
    struct Seen: Sendable {
        var path: String
        var traceparents: [String]
        var tracestates: [String]
        var other: [String]
    }

    private let seen = Locked([Seen]())

    func handler(_ request: LoopbackHTTPServer.Request) async -> LoopbackHTTPServer.Response {
        func values(_ name: String) -> [String] {
            request.headers.filter { $0.name.lowercased() == name }.map(\.value)
        }
        seen.withLock {
            $0.append(
                Seen(
                    path: request.path,
                    traceparents: values("traceparent"),
                    tracestates: values("tracestate"),
                    other: values(InMemoryTracer.traceIDKey)
                )
            )
        }
        return .text(200, "seen")
    }

    /// The requests for `path`.
    func requests(_ path: String) -> [Seen] { seen.withLock { $0.filter { $0.path == path } } }
}

private final class TraceHarness: Sendable {
    let log = HeaderLog()
    let server: LoopbackHTTPServer
    let agent: APIHealthAgent
    let client: HTTPClient
    let session: URLSession

    init(clientTracer: (any Tracer)? = nil) async throws {
        let log = self.log
        server = try await LoopbackHTTPServer.start(threads: 2) { await log.handler($0) }
        var configuration = APIHealthConfiguration(serviceName: "trace-tests")
        configuration.spool = nil
        // A point for every request: each one's correlation id is read.
        configuration.capture.rawPoints = .all
        configuration.capture.tracePropagation = .w3c(firstPartyHosts: ["127.0.0.1"], instrument: W3CInstrument())
        agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "trace-tests"))
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.tracing.tracer = clientTracer
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "urlsession")
        session = URLSession(configuration: sessionConfiguration)
    }

    /// `path` on the first-party host (127.0.0.1), or on another name for the same server (localhost).
    func url(_ path: String, firstParty: Bool) -> String {
        "http://\(firstParty ? "127.0.0.1" : "localhost"):\(server.port)\(path)"
    }

    func get(_ path: String, firstParty: Bool) async throws {
        let response = try await client.execute(
            HTTPClientRequest(url: url(path, firstParty: firstParty)),
            timeout: .seconds(60),
            recordingTo: agent,
            module: "ahc"
        )
        _ = try await response.body.collect(upTo: 1 << 16)
    }

    /// The request point for `path`.
    func point(_ path: String) async throws -> Point? {
        _ = await waitUntil { self.points().contains { $0.tag("path") == path } }
        return points().first { $0.tag("path") == path }
    }

    private func points() -> [Point] {
        agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
    }

    func close() async {
        try? await client.shutdown()
        try? await server.shutdown()
    }
}

private let parent = TraceContext(
    traceID: .random(),
    spanID: .random(),
    flags: .sampled,
    state: TraceState([(.simple("vendor"), "value")])
)

private func withParentSpan<T>(_ body: () async throws -> T) async rethrows -> T {
    var context = ServiceContext.topLevel
    context[SpanContextKey.self] = parent
    return try await ServiceContext.withValue(context, operation: body)
}

@Suite(.serialized) struct TracePropagationTests {
    /// Inside a span: one `traceparent` of the span's trace (a new span id, its flags and state) to the
    /// first-party host, none to another host; each request goes out once; the trace id is recorded.
    @Test func asyncHTTPClientSendsOneTraceparentToAFirstPartyHostAndNoneElsewhere() async throws {
        let harness = try await TraceHarness()
        try await withParentSpan {
            try await harness.get("/first", firstParty: true)
            try await harness.get("/third", firstParty: false)
        }
        let first = harness.log.requests("/first")
        #expect(first.count == 1, "went out once")
        let sent = try #require(first.first?.traceparents.count == 1 ? first.first?.traceparents.first : nil)
        let trace = try TraceContext(traceParentHeaderValue: sent)
        #expect(trace.traceID == parent.traceID)
        #expect(trace.spanID != parent.spanID)
        #expect(trace.flags == parent.flags)
        #expect(first.first?.tracestates == ["vendor=value"])
        let third = harness.log.requests("/third")
        #expect(third.count == 1)
        #expect(third.first?.traceparents == [] && third.first?.tracestates == [])
        #expect(try await harness.point("/first")?.field("correlation_id") == .string("\(parent.traceID)"))
        #expect(try await harness.point("/third")?.field("correlation_id") == nil)
        await harness.close()
    }

    @Test func outsideASpanEachRequestStartsANewSampledTrace() async throws {
        let harness = try await TraceHarness()
        try await harness.get("/one", firstParty: true)
        try await harness.get("/two", firstParty: true)
        let sent = try ["/one", "/two"].map { path in
            let requests = harness.log.requests(path)
            #expect(requests.count == 1 && requests.first?.traceparents.count == 1)
            return try TraceContext(traceParentHeaderValue: requests.first?.traceparents.first ?? "")
        }
        #expect(sent[0].traceID != sent[1].traceID)
        #expect(sent.allSatisfy { $0.flags == .sampled })
        #expect(try await harness.point("/one")?.field("correlation_id") == .string("\(sent[0].traceID)"))
        await harness.close()
    }

    /// URLSession: the caller adds the headers (`addTraceHeaders(to:)`) in its task; the instrumented
    /// session sends the request once with that one header, and records the trace id.
    @Test func urlSessionRequestsCarryTheHeaderTheCallerAddedOnceAndRecordItsTraceID() async throws {
        let harness = try await TraceHarness()
        try await withParentSpan {
            for (path, firstParty) in [("/first", true), ("/third", false)] {
                var request = URLRequest(url: URL(string: harness.url(path, firstParty: firstParty))!)
                harness.agent.addTraceHeaders(to: &request)
                #expect((request.value(forHTTPHeaderField: "traceparent") != nil) == firstParty)
                _ = try await harness.session.data(for: request)
            }
        }
        let first = harness.log.requests("/first")
        #expect(first.count == 1, "went out once")
        #expect(first.first?.traceparents.count == 1)
        let trace = try TraceContext(traceParentHeaderValue: first.first?.traceparents.first ?? "")
        #expect(trace.traceID == parent.traceID && trace.spanID != parent.spanID)
        #expect(harness.log.requests("/third").map(\.traceparents) == [[]])
        #expect(try await harness.point("/first")?.field("correlation_id") == .string("\(parent.traceID)"))
        #expect(try await harness.point("/third")?.field("correlation_id") == nil)
        await harness.close()
    }

    @Test func aRequestThatCarriesATraceparentAlreadyKeepsItsOwn() async throws {
        let harness = try await TraceHarness()
        let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        var request = HTTPClientRequest(url: harness.url("/own", firstParty: true))
        request.headers.add(name: "traceparent", value: own)
        let response = try await harness.client.execute(
            request,
            timeout: .seconds(60),
            recordingTo: harness.agent,
            module: "ahc"
        )
        _ = try await response.body.collect(upTo: 1 << 16)
        var urlRequest = URLRequest(url: URL(string: harness.url("/own-urlsession", firstParty: true))!)
        urlRequest.setValue(own, forHTTPHeaderField: "traceparent")
        harness.agent.addTraceHeaders(to: &urlRequest)
        _ = try await harness.session.data(for: urlRequest)
        #expect(harness.log.requests("/own").map(\.traceparents) == [[own]])
        #expect(harness.log.requests("/own-urlsession").map(\.traceparents) == [[own]])
        #expect(try await harness.point("/own")?.field("correlation_id") == .string("0af7651916cd43dd8448eb211c80319c"))
        await harness.close()
    }

    /// A client with a tracer of its own sends its own trace headers: APIHealth adds none beside them,
    /// and records the trace id of the caller's span.
    @Test func aClientWithItsOwnTracerGetsNoSecondTraceHeader() async throws {
        let harness = try await TraceHarness(clientTracer: InMemoryTracer())
        try await withParentSpan { try await harness.get("/traced", firstParty: true) }
        let traced = harness.log.requests("/traced")
        #expect(traced.count == 1)
        #expect(traced.first?.traceparents == [])
        #expect(traced.first?.other.count == 1, "the client's tracer sent its own")
        #expect(try await harness.point("/traced")?.field("correlation_id") == .string("\(parent.traceID)"))
        await harness.close()
    }

    @Test func aDisabledAgentAddsNothing() throws {
        var configuration = APIHealthConfiguration(serviceName: "trace-tests")
        configuration.isEnabled = false
        configuration.spool = nil
        configuration.capture.tracePropagation = .w3c(firstPartyHosts: ["api.example.com"])
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "trace-tests"))
        var request = URLRequest(url: URL(string: "https://api.example.com/x")!)
        agent.addTraceHeaders(to: &request)
        #expect(request.value(forHTTPHeaderField: "traceparent") == nil)
    }

    @Test func firstPartyHostsNameHostsPortsAndSubdomains() throws {
        var configuration = APIHealthConfiguration(serviceName: "trace-tests")
        configuration.spool = nil
        configuration.capture.tracePropagation = .w3c(
            firstPartyHosts: ["api.example.com", "billing.example.com:8443", "*.internal.example.com", "[::1]:9000"]
        )
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "trace-tests"))
        let expected: [(String, Bool)] = [
            ("https://api.example.com/x", true), ("http://API.example.com:8080/x", true),
            ("https://billing.example.com:8443/x", true), ("https://billing.example.com/x", false),
            ("HTTP://billing.example.com:8443", true), ("https://a.internal.example.com/x", true),
            ("https://internal.example.com/x", false), ("https://api.example.com.evil.com/x", false),
            ("https://example.com/x", false), ("https://user@api.example.com/x", true),
            ("https://api.example.com/a%20b", true), ("http://[::1]:9000/x", true), ("http://[::1]:9001/x", false),
        ]
        for (url, firstParty) in expected {
            #expect((agent.traceHeaders(for: URL(string: url)!) != nil) == firstParty, "\(url)")
            // AsyncHTTPClient's and Vapor's requests give their URL as text: read in place when plain.
            #expect((agent.traceHeaders(forURLText: url) != nil) == firstParty, "\(url) as text")
        }
        #expect(agent.traceHeaders(forURLText: "not a url") == nil)
        for hosts in [[], ["api.example.com/path"], ["*"]] {
            configuration.capture.tracePropagation = .w3c(firstPartyHosts: hosts)
            #expect(throws: APIHealthConfiguration.Error.self, "\(hosts)") { try configuration.validate() }
        }
    }
}
