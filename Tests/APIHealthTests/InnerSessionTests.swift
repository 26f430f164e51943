import APIHealthTestKit
import Foundation
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Apple platforms' hook re-issues each request on an inner session (``InnerSessionLoad``) and
/// forwards its events to the app's task. Here it runs on Linux, against a loopback server, with the
/// app's task played by a client that keeps what it is told: what reaches the app, in order, and the
/// sample recorded.
@Suite struct InnerSessionTests {
    /// The agent's side of the hook: keeps the samples recorded.
    private final class Recorder: SampleRecorder {
        let samples = Locked<[RequestSample]>([])
        var isAlive: Bool { true }
        var owner: AnyObject? { nil }
        var isCapturing: Bool { true }
        var digestsBodies: Bool { true }
        var correlationHeaders: [String] { [] }
        func isExcluded(_ url: URL) -> Bool { false }
        func record(_ sample: RequestSample, request: URLRequest, cacheEvidence: CacheEvidence?) {
            samples.withLock { $0.append(sample) }
        }
        func recordEnded(_ request: any EndedRequestSource) {}
        func observeCountry(in response: HTTPURLResponse?) {}
        func countUncaptured() {}
    }

    /// The app's task: what its protocol's client is told, in order.
    private final class AppTask: NSObject, URLProtocolClient, @unchecked Sendable {
        enum Event: Equatable {
            case response(Int)
            case data(Int)
            case redirected(String)
            case finished
            case failed
        }
        let events = Locked<[Event]>([])
        private func add(_ event: Event) { events.withLock { $0.append(event) } }
        func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
            add(.redirected(request.url?.path ?? ""))
        }
        func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {}
        func urlProtocol(
            _ protocol: URLProtocol,
            didReceive response: URLResponse,
            cacheStoragePolicy policy: URLCache.StoragePolicy
        ) {
            add(.response((response as? HTTPURLResponse)?.statusCode ?? 0))
        }
        func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) { add(.data(data.count)) }
        func urlProtocolDidFinishLoading(_ protocol: URLProtocol) { add(.finished) }
        func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) { add(.failed) }
        func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {}
        func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {}

        /// The body bytes delivered.
        var loaded: Int {
            events.withLock { $0.reduce(0) { if case .data(let count) = $1 { $0 + count } else { $0 } } }
        }
    }

    private struct Load {
        let load: InnerSessionLoad
        let app: AppTask
        let recorder: Recorder
        /// The app's protocol instance: held by the URL loading system while the task runs.
        let owner: URLProtocol
    }

    private static func start(_ url: String, inner: InnerSession) -> Load {
        let recorder = Recorder()
        let app = AppTask()
        let request = URLRequest(url: URL(string: url)!)
        let owner = URLProtocol(request: request, cachedResponse: nil, client: app)
        let load = InnerSessionLoad(
            owner: owner,
            client: app,
            registration: CaptureRegistry.Registration(module: "orders", recorder: recorder, innerSession: inner),
            inner: inner
        )
        load.start(request, started: .now, startedAt: Date())
        return Load(load: load, app: app, recorder: recorder, owner: owner)
    }

    @Test func aRequestReachesTheAppInOrderAndIsRecordedOnce() async throws {
        let body = String(repeating: "x", count: 40_000)
        let server = try await LoopbackHTTPServer.start { _ in .text(200, body) }
        let inner = InnerSession(copying: .ephemeral, module: "orders")
        let started = Self.start("\(server.baseURL)/orders/42", inner: inner)
        #expect(await waitUntil { started.app.events.withLock { $0.last } == .finished })
        let events = started.app.events.withLock { $0 }
        #expect(events.first == .response(200))
        #expect(started.app.loaded == 40_000)
        #expect(events.filter { $0 == .finished }.count == 1 && !events.contains(.failed))
        #expect(await waitUntil { started.recorder.samples.withLock { $0.count } == 1 })
        let sample = try #require(started.recorder.samples.withLock { $0.first })
        #expect(sample.statusCode == 200)
        #expect(sample.responseBytes == 40_000)
        #expect(sample.module == "orders")
        #expect(sample.error == nil)
        withExtendedLifetime(started.owner) {}
        try await server.shutdown()
    }

    /// Once the app's task stops, nothing more reaches it; the request is recorded as cancelled.
    @Test func nothingReachesTheAppAfterItsTaskStops() async throws {
        let server = try await LoopbackHTTPServer.start { _ in
            LoopbackHTTPServer.Response(status: 200, headers: [], body: .hang)
        }
        let inner = InnerSession(copying: .ephemeral, module: "orders")
        let started = Self.start("\(server.baseURL)/slow", inner: inner)
        started.load.stop()
        #expect(await waitUntil { started.recorder.samples.withLock { $0.count } == 1 })
        let sample = try #require(started.recorder.samples.withLock { $0.first })
        #expect(sample.error != nil, "recorded as the cancellation it was")
        #expect(!started.app.events.withLock { $0 }.contains(.finished))
        #expect(!started.app.events.withLock { $0 }.contains(.failed), "a stopped task hears nothing")
        withExtendedLifetime(started.owner) {}
        try await server.shutdown()
    }

    /// A redirect goes to the app's task, which asks the app and starts the next request itself: the
    /// inner request stops there and records nothing.
    @Test func aRedirectGoesToTheAppAndRecordsNothing() async throws {
        let server = try await LoopbackHTTPServer.start { request in
            request.path == "/old"
                ? LoopbackHTTPServer.Response(status: 302, headers: [("Location", "/new")], body: .bytes([]))
                : .text(200, "new")
        }
        let inner = InnerSession(copying: .ephemeral, module: "orders")
        let started = Self.start("\(server.baseURL)/old", inner: inner)
        #expect(await waitUntil { started.app.events.withLock { $0 } == [.redirected("/new")] })
        // The inner task was cancelled at the redirect. Its end is handled in one operation of the inner
        // session's serial delegate queue, which lets go of the task and queues the end on the request's
        // own queue; `stop()` takes its turn on that queue after it, so once it returns the end is handled.
        #expect(
            await waitUntil {
                await withCheckedContinuation { running in
                    inner.delegate.queue.addOperation { running.resume(returning: inner.delegate.runningTasks) }
                } == 0
            }
        )
        started.load.stop()
        #expect(started.recorder.samples.withLock { $0 }.isEmpty, "the redirect's hop records nothing")
        #expect(started.app.events.withLock { $0 } == [.redirected("/new")], "and tells the app nothing more")
        withExtendedLifetime(started.owner) {}
        try await server.shutdown()
    }
}
