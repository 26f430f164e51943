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

@testable import APIHealth

/// What a caller sees of one AsyncHTTPClient request, compared with and without APIHealth.
struct Seen: Equatable {
    var status: Int?
    var contentType: String?
    var bodyBytes: Int?
    var error: String?
}

final class AHCHarness: Sendable {
    let server: LoopbackHTTPServer
    let agent: APIHealthAgent
    let client: HTTPClient

    init(configure: (inout APIHealthConfiguration) -> Void = { _ in }) async throws {
        server = try await LoopbackHTTPServer.start(threads: 2, handler: TestRoutes.handle)
        var configuration = APIHealthConfiguration(serviceName: "ahc-tests")
        configuration.spool = nil
        configuration.precision = .ns
        // A point for every request: the tests read each request's own.
        configuration.capture.rawPoints = .all
        configure(&configuration)
        agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "ahc-tests"))
        var clientConfiguration = HTTPClient.Configuration(redirectConfiguration: .follow(max: 5, allowCycles: false))
        clientConfiguration.timeout.read = .seconds(60)
        // Also how long a request may wait for one of the pool's connections: a thousand at once on a loaded
        // machine (a sanitizer, builds beside it) wait longer than the default 10 s.
        clientConfiguration.timeout.connect = .seconds(60)
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    }

    /// A test that ends before ``close()`` (a failed `#require`) still shuts its client down: an
    /// `HTTPClient` released while running stops the whole test process, which would hide what failed.
    deinit {
        client.shutdown { _ in }
    }

    func url(_ path: String) -> String { server.baseURL + path }

    func requests() -> [Point] {
        agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
    }

    func waitForRequests(_ count: Int) async throws -> [Point] {
        try await waitForValues(count, requests)
    }

    /// Runs `request` plainly or instrumented and reads the whole body.
    func run(_ request: HTTPClientRequest, instrumented: Bool, timeout: TimeAmount = .seconds(60)) async -> Seen {
        do {
            let response =
                instrumented
                ? try await client.execute(request, timeout: timeout, recordingTo: agent, module: "ahc")
                : try await client.execute(request, timeout: timeout)
            var bytes = 0
            for try await chunk in response.body { bytes += chunk.readableBytes }
            return Seen(
                status: Int(response.status.code),
                contentType: response.headers.first(name: "content-type"),
                bodyBytes: bytes
            )
        } catch {
            return Seen(error: String(describing: error))
        }
    }

    func close() async {
        try? await client.shutdown()
        try? await server.shutdown()
    }
}

@Suite(.serialized) struct AsyncHTTPClientCaptureTests {
    @Test(arguments: ["/ok", "/status/404", "/status/503", "/redirect/3"])
    func callersSeeTheSameWithAndWithoutAPIHealth(path: String) async throws {
        let harness = try await AHCHarness()
        var request = HTTPClientRequest(url: harness.url(path))
        request.headers.add(name: "X-Request-Id", value: "ahc-\(path.count)")
        let plain = await harness.run(request, instrumented: false)
        let observed = await harness.run(request, instrumented: true)
        #expect(plain.status != nil)
        #expect(observed == plain)
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.tag("host") == "127.0.0.1:\(harness.server.port)")
        #expect(point.tag("module") == "ahc")
        #expect(point.tag("status") == "\(plain.status!)")
        #expect(point.field("response_bytes") == .uint(UInt64(plain.bodyBytes!)))
        #expect(point.field("correlation_id") == .string("ahc-\(path.count)"))
        #expect(point.field("redirects") == .int(path.hasPrefix("/redirect") ? 3 : 0))
        if path.hasPrefix("/redirect") { #expect(point.tag("path") == "/redirect/{id}") }
        await harness.close()
    }

    @Test func timeToFirstByteAndDurationMatchTheServersDelays() async throws {
        let harness = try await AHCHarness()
        _ = await harness.run(HTTPClientRequest(url: harness.url("/ok")), instrumented: false)  // a warm connection
        // The caller's stopwatch: to the response head, and to the end of the body.
        let started = ContinuousClock.now
        let response = try await harness.client.execute(
            HTTPClientRequest(url: harness.url("/timed")),
            timeout: .seconds(60),
            recordingTo: harness.agent,
            module: "ahc"
        )
        let head = (ContinuousClock.now - started) / .milliseconds(1)
        let body = try await response.body.collect(upTo: 1 << 16)
        let end = (ContinuousClock.now - started) / .milliseconds(1)
        #expect(body.readableBytes == 5)
        let point = try #require(try await harness.waitForRequests(1).first)
        guard case .float(let ttfb) = point.field("ttfb_ms"), case .float(let duration) = point.field("duration_ms")
        else {
            Issue.record("no timings in \(point)")
            return
        }
        // The server waits 200 ms before the head and 300 ms more before the body.
        #expect(ttfb >= 200 && duration >= 500, "ttfb \(ttfb) ms, duration \(duration) ms")
        #expect(abs(ttfb - head) <= 1 + head * 0.02, "ttfb \(ttfb) ms, caller saw the head at \(head) ms")
        #expect(abs(duration - end) <= 1 + end * 0.02, "duration \(duration) ms, caller read the end at \(end) ms")
        await harness.close()
    }

    @Test func aLargeBodyStreamsThroughWithFlatMemory() async throws {
        let harness = try await AHCHarness()
        let total = 100 * 1_024 * 1_024
        let before = residentBytes()
        var peak = before
        let response = try await harness.client.execute(
            HTTPClientRequest(url: harness.url("/bytes/\(total)")),
            timeout: .seconds(60),
            recordingTo: harness.agent,
            module: "ahc"
        )
        var bytes = 0
        for try await chunk in response.body {
            bytes += chunk.readableBytes
            if bytes % (8 << 20) < chunk.readableBytes { peak = max(peak, residentBytes()) }
        }
        #expect(bytes == total)
        #expect(peak - before < 40 * 1_024 * 1_024, "grew \(peak - before) bytes")
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.field("response_bytes") == .uint(UInt64(total)))
        await harness.close()
    }

    @Test func aStreamedRequestBodyGoesUpWhole() async throws {
        let harness = try await AHCHarness()
        let payload = ByteBuffer(bytes: (0..<1_000_000).map { UInt8($0 % 253) })
        func upload(_ instrumented: Bool) async throws -> (Int, String?) {
            var request = HTTPClientRequest(url: harness.url("/echo"))
            request.method = .PUT
            let chunks = stride(from: 0, to: payload.readableBytes, by: 65_536).map {
                payload.getSlice(at: $0, length: min(65_536, payload.readableBytes - $0))!
            }
            request.body = .stream(chunks.async, length: .known(Int64(payload.readableBytes)))
            request.headers.add(name: "Content-Length", value: "\(payload.readableBytes)")
            let response =
                instrumented
                ? try await harness.client.execute(
                    request,
                    timeout: .seconds(60),
                    recordingTo: harness.agent,
                    module: "ahc"
                )
                : try await harness.client.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 2 << 20)
            #expect(body == payload)
            return (Int(response.status.code), response.headers.first(name: "X-Received-Bytes"))
        }
        let plain = try await upload(false)
        let observed = try await upload(true)
        #expect(observed == plain && plain.1 == "1000000")
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.field("request_bytes") == .uint(1_000_000))
        #expect(point.tag("method") == "PUT")
        await harness.close()
    }

    @Test func transportFailuresAreTheSameAndRecorded() async throws {
        let harness = try await AHCHarness()
        let closed = try RefusingPort()
        let refused = HTTPClientRequest(url: closed.url.absoluteString + "/ok")
        #expect(await harness.run(refused, instrumented: true) == (await harness.run(refused, instrumented: false)))
        withExtendedLifetime(closed) {}
        let hang = HTTPClientRequest(url: harness.url("/hang"))
        let plainTimeout = await harness.run(hang, instrumented: false, timeout: .milliseconds(300))
        let observedTimeout = await harness.run(hang, instrumented: true, timeout: .milliseconds(300))
        #expect(plainTimeout.error != nil && observedTimeout == plainTimeout)
        let points = try await harness.waitForRequests(2)
        #expect(points.map { $0.tag("status") } == ["error", "error"])
        #expect(points.contains { $0.field("error") == .string("NSURLErrorDomain \(NSURLErrorCannotConnectToHost)") })
        #expect(points.contains { $0.field("error") == .string("NSURLErrorDomain \(NSURLErrorTimedOut)") })
        await harness.close()
    }

    @Test func cancellingMidBodyReachesTheCallerAndEndsTheSample() async throws {
        let harness = try await AHCHarness()
        // The server sends the head and the first 64 KiB of a 200 MiB body, then holds the rest until
        // the client goes away: the body is still arriving when the task is cancelled, however fast or
        // slow the machine.
        let (firstBytes, sawFirstBytes) = AsyncStream.makeStream(of: Int.self)
        let reading = Task {
            defer { sawFirstBytes.finish() }
            let response = try await harness.client.execute(
                HTTPClientRequest(url: harness.url("/stalled/\(200 << 20)")),
                timeout: .seconds(120),
                recordingTo: harness.agent,
                module: "ahc"
            )
            var bytes = 0
            for try await chunk in response.body {
                if bytes == 0 { sawFirstBytes.yield(chunk.readableBytes) }
                bytes += chunk.readableBytes
            }
            return bytes
        }
        var arrivals = firstBytes.makeAsyncIterator()
        guard await arrivals.next() != nil else {
            Issue.record("the read ended before any of the body arrived: \(await reading.result)")
            return
        }
        reading.cancel()
        // Without the cancellation the read would end only in the client's read timeout, a different error.
        let outcome = await reading.result
        guard case .failure(let error) = outcome else {
            Issue.record("the read ended without an error: \(outcome)")
            return
        }
        #expect(
            error is CancellationError || (error as? HTTPClientError) == .cancelled,
            "the caller sees the cancellation, not another failure: \(error)"
        )
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.tag("status") == "error")
        #expect(point.field("error") == .string("NSURLErrorDomain \(NSURLErrorCancelled)"))
        await harness.close()
    }

    @Test func aResponseDroppedUnreadStillEndsItsSample() async throws {
        let harness = try await AHCHarness()
        do {
            let response = try await harness.client.execute(
                HTTPClientRequest(url: harness.url("/ok")),
                timeout: .seconds(60),
                recordingTo: harness.agent,
                module: "ahc"
            )
            #expect(response.status == .ok)
        }
        let points = try await harness.waitForRequests(1)
        #expect(points.count == 1 && points.first?.tag("status") == "200")
        await harness.close()
    }

    @Test func requestsWaitingToBeEncodedDoNotKeepTheAgentAlive() async throws {
        let server = try await LoopbackHTTPServer.start(threads: 1, handler: TestRoutes.handle)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        weak var weakAgent: APIHealthAgent?
        do {
            var configuration = APIHealthConfiguration(serviceName: "ahc-tests")
            configuration.spool = nil
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "ahc-tests"))
            weakAgent = agent
            for _ in 0..<3 {
                // Read to the end: the observation itself waits in the agent's queue.
                let response = try await client.execute(
                    HTTPClientRequest(url: server.baseURL + "/ok"),
                    timeout: .seconds(60),
                    recordingTo: agent,
                    module: "ahc"
                )
                _ = try await response.body.collect(upTo: 1 << 20)
            }
            // Dropped unread: the observation's copy waits in the queue.
            _ = try await client.execute(
                HTTPClientRequest(url: server.baseURL + "/ok"),
                timeout: .seconds(60),
                recordingTo: agent,
                module: "ahc"
            )
        }
        #expect(weakAgent == nil, "a request waiting in the agent's queue keeps the agent alive")
        try await client.shutdown()
        try await server.shutdown()
    }

    @Test func aThousandConcurrentRequestsGiveAThousandSamples() async throws {
        let harness = try await AHCHarness()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<1_000 {
                group.addTask {
                    let path = index % 4 == 0 ? "/status/500" : index % 4 == 1 ? "/status/404" : "/ok"
                    let response = try await harness.client.execute(
                        HTTPClientRequest(url: harness.url(path)),
                        timeout: .seconds(60),
                        recordingTo: harness.agent,
                        module: "ahc"
                    )
                    _ = try await response.body.collect(upTo: 1 << 20)
                    return Int(response.status.code)
                }
            }
            return try await group.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }
        }
        #expect(statuses == [500: 250, 404: 250, 200: 500])
        let points = try await harness.waitForRequests(1_000)
        #expect(points.count == 1_000)
        #expect(
            points.reduce(into: [String: Int]()) { $0[$1.tag("status") ?? "", default: 0] += 1 } == [
                "500": 250, "404": 250, "200": 500,
            ]
        )
        await harness.close()
    }

    @Test func theDelegateAPISeesTheSameAndIsRecorded() async throws {
        let harness = try await AHCHarness()
        let request = try HTTPClient.Request(url: harness.url("/redirect/2"))
        let plain = try await harness.client.execute(request: request, delegate: ResponseAccumulator(request: request))
            .get()
        let observed = try await harness.client.execute(
            request: request,
            delegate: ResponseAccumulator(request: request),
            recordingTo: harness.agent,
            module: "ahc"
        ).get()
        #expect(observed.status == plain.status && observed.body == plain.body)
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.tag("status") == "200")
        #expect(point.field("redirects") == .int(2))
        #expect(point.field("response_bytes") == .uint(UInt64(plain.body?.readableBytes ?? 0)))
        await harness.close()
    }

    @Test func aURLAsyncHTTPClientRefusesFailsTheSameAndRecordsNothing() async throws {
        let harness = try await AHCHarness()
        for url in ["ftp://127.0.0.1/file", "http:///nohost", "not a url"] {
            let request = HTTPClientRequest(url: url)
            let plain = await harness.run(request, instrumented: false)
            let observed = await harness.run(request, instrumented: true)
            #expect(plain.error != nil)
            #expect(observed == plain, "\(url)")
        }
        // A request that is recorded, made after them: once it is, anything recorded of the refused ones
        // (as they failed, before the caller heard of it) is there too.
        let marker = await harness.run(HTTPClientRequest(url: harness.url("/ok")), instrumented: true)
        #expect(marker.status == 200)
        let recorded = try await harness.waitForRequests(1)
        #expect(recorded.map { $0.tag("path") } == ["/ok"], "\(recorded)")
        #expect(harness.requests().filter { $0.tag("path") != "/ok" }.isEmpty)
        await harness.close()
    }
}
