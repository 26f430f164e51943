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

/// What an app sees of one request: compared with and without instrumentation.
struct Observed: Equatable {
    var status: Int?
    var headers: [String: String]
    var body: Data?
    var errorCode: Int?

    init(data: Data?, response: URLResponse?, error: (any Error)?) {
        let http = response as? HTTPURLResponse
        status = http?.statusCode
        var headers: [String: String] = [:]
        for name in ["Content-Type", "Content-Length", "X-Request-Id", "X-Custom", "X-Status", "X-Received-Bytes"] {
            if let value = http?.value(forHTTPHeaderField: name) { headers[name] = value }
        }
        self.headers = headers
        body = error == nil ? (data ?? Data()) : nil
        errorCode = error.map { ($0 as NSError).code }
    }
}

final class CaptureHarness: Sendable {
    let server: LoopbackHTTPServer
    /// The paths the server was asked for.
    let arrivals = Arrivals()
    let agent: APIHealthAgent
    let plain: URLSession
    let instrumented: URLSession
    let spool: URL

    init(
        module: String = "tests",
        configure: (inout APIHealthConfiguration) -> Void = { _ in }
    ) async throws {
        server = try await LoopbackHTTPServer.start(threads: 2, handler: arrivals.noting(TestRoutes.handle))
        spool = temporaryDirectory("capture")
        var configuration = APIHealthConfiguration(serviceName: "capture-tests")
        configuration.spool = SpoolOptions(directory: spool)
        configuration.precision = .ns
        // A point for every request: the tests read each request's own.
        configuration.capture.rawPoints = .all
        configure(&configuration)
        agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "capture-tests"))
        let plainConfiguration = URLSessionConfiguration.ephemeral
        plainConfiguration.timeoutIntervalForRequest = 60
        plain = URLSession(configuration: plainConfiguration)
        let instrumentedConfiguration = URLSessionConfiguration.ephemeral
        instrumentedConfiguration.timeoutIntervalForRequest = 60
        agent.instrument(instrumentedConfiguration, module: module)
        instrumented = URLSession(configuration: instrumentedConfiguration)
    }

    func url(_ path: String) -> URL { URL(string: server.baseURL + path)! }

    func requests() -> [Point] {
        agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
    }

    /// Waits until `count` request points are pending (recording happens as tasks complete).
    func waitForRequests(_ count: Int) async throws -> [Point] {
        try await waitForValues(count, requests)
    }

    func close() async {
        try? await server.shutdown()
        try? FileManager.default.removeItem(at: spool)
    }
}

func observe(_ session: URLSession, _ request: URLRequest) async -> Observed {
    do {
        let (data, response) = try await session.data(for: request)
        return Observed(data: data, response: response, error: nil)
    } catch {
        return Observed(data: nil, response: nil, error: error)
    }
}

@Suite(.serialized) struct CaptureTests {
    @Test(arguments: ["/ok", "/status/404", "/status/503", "/redirect/3", "/json/user"])
    func appSeesTheSameWithAndWithoutInstrumentation(path: String) async throws {
        let harness = try await CaptureHarness()
        var request = URLRequest(url: harness.url(path))
        request.setValue("req-\(path.count)", forHTTPHeaderField: "X-Request-Id")
        let plain = await observe(harness.plain, request)
        let instrumented = await observe(harness.instrumented, request)
        #expect(plain.status != nil)
        #expect(instrumented == plain)
        let points = try await harness.waitForRequests(1)
        #expect(points.count == 1)
        let point = try #require(points.first)
        #expect(point.tag("host") == "127.0.0.1:\(harness.server.port)")
        #expect(point.tag("module") == "tests")
        #expect(point.tag("method") == "GET")
        #expect(point.tag("status") == "\(plain.status!)")
        #expect(point.tag("status_class") == "\(plain.status! / 100)xx")
        #expect(point.field("status_code") == .int(Int64(plain.status!)))
        #expect(point.field("success") == .bool(plain.status! < 400))
        #expect(point.field("response_bytes") == .uint(UInt64(plain.body!.count)))
        #expect(point.field("correlation_id") == .string("req-\(path.count)"))
        guard case .float(let duration) = point.field("duration_ms") else {
            Issue.record("duration missing: \(point)")
            return
        }
        #expect(duration > 0)
        if case .float(let ttfb) = point.field("ttfb_ms") { #expect(ttfb > 0 && ttfb <= duration) }
        if path.hasPrefix("/redirect") {
            #expect(point.tag("path") == "/redirect/{id}")
            #if canImport(Darwin)
            #expect(point.field("redirects") == .int(3))
            #else
            // swift-corelibs-foundation follows redirects inside its protocol, out of the hook's sight.
            #expect(point.field("redirects") == nil)
            #endif
        }
        await harness.close()
    }

    @Test func transportFailuresMatchAndAreRecorded() async throws {
        let harness = try await CaptureHarness()
        let closed = try RefusingPort()
        let refused = URLRequest(url: closed.url.appendingPathComponent("ok"))
        let plainRefused = await observe(harness.plain, refused)
        let instrumentedRefused = await observe(harness.instrumented, refused)
        withExtendedLifetime(closed) {}
        #expect(plainRefused.errorCode != nil)
        #expect(instrumentedRefused == plainRefused)

        var hang = URLRequest(url: harness.url("/hang"))
        hang.timeoutInterval = 1
        let plainTimeout = await observe(harness.plain, hang)
        let instrumentedTimeout = await observe(harness.instrumented, hang)
        #expect(plainTimeout.errorCode == NSURLErrorTimedOut)
        #expect(instrumentedTimeout == plainTimeout)

        let points = try await harness.waitForRequests(2)
        #expect(points.map { $0.tag("status") } == ["error", "error"])
        #expect(points.map { $0.tag("status_class") } == ["error", "error"])
        #expect(points.contains { $0.field("error") == .string("NSURLErrorDomain \(plainRefused.errorCode!)") })
        #expect(points.contains { $0.field("error") == .string("NSURLErrorDomain \(NSURLErrorTimedOut)") })
        #expect(points.allSatisfy { $0.field("success") == .bool(false) && $0.field("status_code") == nil })
        await harness.close()
    }

    @Test func cancellationReachesTheAppAndIsRecorded() async throws {
        let harness = try await CaptureHarness()
        // The server never answers: the request is under way, whatever the machine's speed, from its
        // arrival until the app cancels it (had the cancellation not reached it, it would time out).
        let task = Task { await observe(harness.instrumented, URLRequest(url: harness.url("/hang"))) }
        #expect(await harness.arrivals.wait(for: "/hang"))
        task.cancel()
        let observed = await task.value
        #expect(observed.errorCode == NSURLErrorCancelled)
        let points = try await harness.waitForRequests(1)
        #expect(points.first?.field("error") == .string("NSURLErrorDomain \(NSURLErrorCancelled)"))
        await harness.close()
    }

    @Test func completionHandlerAndDelegateAPIsAreCaptured() async throws {
        let harness = try await CaptureHarness()
        let viaHandler: Observed = await withCheckedContinuation { continuation in
            harness.instrumented.dataTask(with: harness.url("/bytes/300000")) { data, response, error in
                continuation.resume(returning: Observed(data: data, response: response, error: error))
            }.resume()
        }
        #expect(viaHandler.status == 200)
        #expect(viaHandler.body?.count == 300_000)

        let collector = CollectingDelegate()
        let configuration = URLSessionConfiguration.ephemeral
        harness.agent.instrument(configuration, module: "delegates")
        let delegateSession = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        delegateSession.dataTask(with: harness.url("/bytes/300000")).resume()
        let result = await collector.finished()
        #expect(result.error == nil)
        #expect(result.bytes == 300_000)
        #expect(result.chunks > 1, "bodies stream through in chunks")

        var upload = URLRequest(url: harness.url("/echo"))
        upload.httpMethod = "POST"
        let payload = Data((0..<200_000).map { UInt8($0 % 251) })
        let (echoed, response) = try await harness.instrumented.upload(for: upload, from: payload)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(echoed == payload, "upload(for:from:) sends its body through the hook")

        let points = try await harness.waitForRequests(3)
        #expect(points.count == 3)
        #expect(Set(points.compactMap { $0.tag("module") }) == ["tests", "delegates"])
        let post = try #require(points.first { $0.tag("method") == "POST" })
        #expect(post.field("request_bytes") == .uint(200_000))
        #expect(post.field("response_bytes") == .uint(200_000))
        await harness.close()
    }

    @Test func bodyStreamUploadsArriveWhole() async throws {
        let harness = try await CaptureHarness()
        let payload = Data((0..<1_000_000).map { UInt8($0 % 253) })
        var request = URLRequest(url: harness.url("/echo"))
        request.httpMethod = "PUT"
        request.httpBodyStream = InputStream(data: payload)
        var plainRequest = request
        plainRequest.httpBodyStream = InputStream(data: payload)
        let (plainData, _) = try await harness.plain.data(for: plainRequest)
        #expect(plainData == payload)
        let (data, response) = try await harness.instrumented.data(for: request)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Received-Bytes") == "1000000")
        #expect(data == payload)
        let points = try await harness.waitForRequests(1)
        #if canImport(Darwin)
        #expect(points.first?.field("request_bytes") == .uint(1_000_000))
        #else
        // Neither a delegate counts the stream's bytes nor does the request declare a Content-Length.
        #expect(points.first?.field("request_bytes") == .uint(0))
        #endif
        await harness.close()
    }

    @Test func aThousandConcurrentRequestsGiveAThousandSamples() async throws {
        let harness = try await CaptureHarness()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<1_000 {
                group.addTask {
                    let path = index % 4 == 0 ? "/status/500" : index % 4 == 1 ? "/status/404" : "/ok"
                    let (_, response) = try await harness.instrumented.data(from: harness.url(path))
                    return (response as! HTTPURLResponse).statusCode
                }
            }
            return try await group.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }
        }
        #expect(statuses == [500: 250, 404: 250, 200: 500])
        let points = try await harness.waitForRequests(1_000)
        #expect(points.count == 1_000)
        let recorded = points.reduce(into: [String: Int]()) { $0[$1.tag("status") ?? "", default: 0] += 1 }
        #expect(recorded == ["500": 250, "404": 250, "200": 500])
        #expect(
            Set(points.compactMap(\.timestamp)).count == 1_000
                || Set(points.map { "\($0.tags)\(String(describing: $0.timestamp))" }).count == 1_000
        )
        await harness.close()
    }

    @Test func largeDownloadsStreamWithFlatMemory() async throws {
        let harness = try await CaptureHarness(module: "downloads")
        let collector = CollectingDelegate()
        let configuration = URLSessionConfiguration.ephemeral
        harness.agent.instrument(configuration, module: "downloads")
        let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        let before = residentBytes()
        session.dataTask(with: harness.url("/bytes/\(100 * 1_024 * 1_024)")).resume()
        let result = await collector.finished()
        let growth = residentBytes() - before
        #expect(result.error == nil)
        #expect(result.bytes == 100 * 1_024 * 1_024)
        #expect(collector.peakResidentGrowth(since: before) < 40 * 1_024 * 1_024, "grew \(growth) bytes")
        let points = try await harness.waitForRequests(1)
        #expect(points.first?.field("response_bytes") == .uint(100 * 1_024 * 1_024))
        await harness.close()
    }

    @Test func downloadTasksWorkAsWithoutTheHookAndAreRecorded() async throws {
        let harness = try await CaptureHarness()
        let (plainFile, plainResponse) = try await harness.plain.download(from: harness.url("/bytes/200000"))
        let (file, response) = try await harness.instrumented.download(from: harness.url("/bytes/200000"))
        #expect((plainResponse as? HTTPURLResponse)?.statusCode == 200)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(try Data(contentsOf: file) == Data(contentsOf: plainFile))
        #expect(try Data(contentsOf: file).count == 200_000)
        let points = try await harness.waitForRequests(1)
        #expect(points.count == 1)
        #expect(points.first?.tag("status") == "200")
        #expect(points.first?.field("response_bytes") == .uint(200_000))
        await harness.close()
    }
}

/// A data delegate that counts what it receives and tracks resident memory while it does.
final class CollectingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    struct Result {
        var bytes = 0
        var chunks = 0
        var error: (any Error)?
    }

    private struct State {
        var result = Result()
        var peak = 0
        var continuation: CheckedContinuation<Result, Never>?
        var done = false
    }

    /// Guards what was received so far, the peak resident memory, and the waiting caller.
    private let state = Locked(State())

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let resident = residentBytes()
        state.withLock { state in
            state.result.bytes += data.count
            state.result.chunks += 1
            state.peak = max(state.peak, resident)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (waiting, result) = state.withLock { state -> (CheckedContinuation<Result, Never>?, Result) in
            state.result.error = error
            state.done = true
            defer { state.continuation = nil }
            return (state.continuation, state.result)
        }
        waiting?.resume(returning: result)
    }

    func finished() async -> Result {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result? in
                if state.done { return state.result }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func peakResidentGrowth(since baseline: Int) -> Int { state.withLock { $0.peak - baseline } }
}
