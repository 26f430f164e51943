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

/// A session delegate that answers redirects and authentication challenges its own way and counts
/// how often it was asked.
final class DecidingDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    /// Guards how often the delegate was asked about redirects and challenges.
    private let questions = Locked((redirects: 0, challenges: 0))
    let followsRedirects: Bool
    let credential: URLCredential?

    init(followsRedirects: Bool = true, credential: URLCredential? = nil) {
        self.followsRedirects = followsRedirects
        self.credential = credential
    }

    var asked: (redirects: Int, challenges: Int) { questions.withLock { $0 } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        questions.withLock { $0.redirects += 1 }
        completionHandler(followsRedirects ? request : nil)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        questions.withLock { $0.challenges += 1 }
        if let credential {
            completionHandler(.useCredential, credential)
        } else {
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }
}

/// Runs one data task on `session` and returns what the app saw and how long it took: the caller's
/// stopwatch, from before it makes the task to the start of its completion handler.
func stopwatch(_ session: URLSession, _ url: URL) async -> (Observed, Duration) {
    await withCheckedContinuation { continuation in
        let started = ContinuousClock.now
        session.dataTask(with: url) { data, response, error in
            let elapsed = ContinuousClock.now - started
            continuation.resume(returning: (Observed(data: data, response: response, error: error), elapsed))
        }.resume()
    }
}

/// The `duration_ms` field of a request point.
func durationMilliseconds(_ point: Point) -> Double? {
    if case .float(let value) = point.field("duration_ms") { return value }
    return nil
}

/// Runs one data task on `session` through its delegate and returns what the app saw.
func observeWithHandler(_ session: URLSession, _ url: URL) async -> Observed {
    await withCheckedContinuation { continuation in
        session.dataTask(with: url) { data, response, error in
            continuation.resume(returning: Observed(data: data, response: response, error: error))
        }.resume()
    }
}

@Suite(.serialized) struct HostSafetyTests {
    /// A session made from `configuration` (instrumented by `agent` when given) with `delegate`.
    private func session(
        _ agent: APIHealthAgent?,
        module: String = "tests",
        delegate: DecidingDelegate
    ) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 60
        agent?.instrument(configuration, module: module)
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    @Test func aDelegateThatRefusesRedirectsIsAskedAndGetsTheRedirect() async throws {
        let harness = try await CaptureHarness()
        let plainDelegate = DecidingDelegate(followsRedirects: false)
        let hookedDelegate = DecidingDelegate(followsRedirects: false)
        let plain = await observeWithHandler(session(nil, delegate: plainDelegate), harness.url("/redirect/2"))
        let hooked = await observeWithHandler(
            session(harness.agent, delegate: hookedDelegate),
            harness.url("/redirect/2")
        )
        #expect(plain.status == 302)
        #expect(hooked == plain)
        #expect(plainDelegate.asked.redirects == 1)
        #expect(hookedDelegate.asked.redirects == plainDelegate.asked.redirects)
        let points = try await harness.waitForRequests(1)
        #expect(points.first?.tag("status") == "302")
        await harness.close()
    }

    @Test func aDelegateThatFollowsRedirectsIsAskedForEveryHop() async throws {
        let harness = try await CaptureHarness()
        let plainDelegate = DecidingDelegate(followsRedirects: true)
        let hookedDelegate = DecidingDelegate(followsRedirects: true)
        // Each of the three hops and the last answer come 20 ms after their request.
        let url = harness.url("/redirect/3?delay=20")
        let plain = await observeWithHandler(session(nil, delegate: plainDelegate), url)
        let hookedSession = session(harness.agent, delegate: hookedDelegate)
        // The caller's stopwatch: from resume() to its completion handler.
        let (hooked, elapsed) = await stopwatch(hookedSession, url)
        #expect(hooked == plain)
        #expect(plain.status == 200)
        #expect(hookedDelegate.asked.redirects == 3)
        #expect(plainDelegate.asked.redirects == 3)
        let point = try #require(try await harness.waitForRequests(1).first)
        let duration = try #require(durationMilliseconds(point))
        // The sample covers the whole chain, within what the caller saw.
        #expect(duration >= 4 * 20, "\(duration) ms")
        #expect(duration <= elapsed / .milliseconds(1), "\(duration) ms, the caller saw \(elapsed)")
        await harness.close()
    }

    @Test func theDurationEndsWhenTheAppHearsOfTheEnd() async throws {
        let harness = try await CaptureHarness()
        // The app's delegate queue is busy with work of its own from when the last hop of a redirect
        // chain (three hops, each answered 20 ms after its request) reaches the server until 50 ms
        // later: the app hears of the end at least 3 × 20 + 50 ms after it began.
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let configuration = URLSessionConfiguration.ephemeral
        harness.agent.instrument(configuration, module: "tests")
        let session = URLSession(configuration: configuration, delegate: nil, delegateQueue: queue)
        let lastHop = DispatchSemaphore(value: 0)
        Task {
            _ = await harness.arrivals.wait(for: "/redirect/0")
            lastHop.signal()
        }
        queue.addOperation {
            lastHop.wait()
            Thread.sleep(forTimeInterval: 0.05)  // the app's own work on its queue: the delay under test
        }
        let (observed, elapsed) = await stopwatch(session, harness.url("/redirect/3?delay=20"))
        #expect(observed.status == 200)
        let point = try #require(try await harness.waitForRequests(1).first)
        let duration = try #require(durationMilliseconds(point))
        #expect(duration >= 3 * 20 + 50, "\(duration) ms")
        #expect(duration <= elapsed / .milliseconds(1), "\(duration) ms, the caller saw \(elapsed)")
        await harness.close()
    }

    @Test func authenticationChallengesReachTheAppsDelegate() async throws {
        let harness = try await CaptureHarness()
        for credential in [URLCredential(user: "user", password: "secret", persistence: .none), nil] {
            let plainDelegate = DecidingDelegate(credential: credential)
            let hookedDelegate = DecidingDelegate(credential: credential)
            let plain = await observeWithHandler(session(nil, delegate: plainDelegate), harness.url("/basic-auth"))
            let hooked = await observeWithHandler(
                session(harness.agent, delegate: hookedDelegate),
                harness.url("/basic-auth")
            )
            #expect(plainDelegate.asked.challenges >= 1)
            #expect(hookedDelegate.asked.challenges == plainDelegate.asked.challenges)
            #expect(hooked == plain)
            if credential != nil { #expect(hooked.status == 200) }
        }
        await harness.close()
    }

    @Test func anAuthenticatedRequestIsRecordedAsTheAppSawIt() async throws {
        let harness = try await CaptureHarness()
        // Each leg is answered 20 ms after its request: the 401 with its challenge, then the 200.
        let url = harness.url("/basic-auth/20")
        let credential = URLCredential(user: "user", password: "secret", persistence: .none)
        let delegate = DecidingDelegate(credential: credential)
        let (observed, elapsed) = await stopwatch(session(harness.agent, delegate: delegate), url)
        #expect(observed.status == 200)
        #expect(delegate.asked.challenges == 1)
        // Recorded before the app heard of the end: nothing else is coming.
        let points = harness.requests()
        #expect(points.count == 1, "\(points)")
        let point = try #require(points.first)
        #expect(point.tag("status") == "200")
        #expect(point.field("success") == .bool(true))
        #expect(point.field("response_bytes") == .uint(UInt64("welcome".utf8.count)))
        let duration = try #require(durationMilliseconds(point))
        #expect(duration >= 2 * 20, "both legs: \(duration) ms")
        #expect(duration <= elapsed / .milliseconds(1), "\(duration) ms, the caller saw \(elapsed)")

        // A challenge the app cancels ends the request there: the app sees the cancellation.
        let refusing = DecidingDelegate(credential: nil)
        let (cancelled, _) = await stopwatch(session(harness.agent, delegate: refusing), url)
        #expect(cancelled.errorCode == NSURLErrorCancelled)
        let last = try #require(try await harness.waitForRequests(2).last)
        #expect(last.tag("status") == "error")
        #expect(last.field("error") == .string("\(NSURLErrorDomain) \(NSURLErrorCancelled)"))
        await harness.close()
    }

    @Test func aHookWhoseAgentIsGonePassesRequestsThroughUntouched() async throws {
        let harness = try await CaptureHarness(module: "second")
        let staleConfiguration = URLSessionConfiguration.ephemeral
        staleConfiguration.httpAdditionalHeaders = ["X-Token": "first"]
        do {
            var configuration = APIHealthConfiguration(serviceName: "first")
            configuration.spool = nil
            let first = try APIHealthAgent(configuration: configuration, logger: Logger(label: "first"))
            first.instrument(staleConfiguration, module: "first")
        }
        // A new agent instruments configurations of its own, with other credentials.
        let secondConfiguration = URLSessionConfiguration.ephemeral
        secondConfiguration.httpAdditionalHeaders = ["X-Token": "second", "Authorization": "Token second-secret"]
        for module in ["second", "third", "fourth"] {
            harness.agent.instrument(secondConfiguration, module: module)
        }
        let stale = URLSession(configuration: staleConfiguration)
        let (data, response) = try await stale.data(from: harness.url("/headers"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(
            String(decoding: data, as: UTF8.self) == "first -",
            "the stale configuration's own headers, nothing else"
        )
        // A request of the second agent's own, after the stale one ended: once it is recorded, so is
        // anything recorded of the stale one (requests are recorded as they end, in order).
        _ = try await harness.instrumented.data(from: harness.url("/ok"))
        let recorded = try await harness.waitForRequests(1)
        #expect(recorded.map { $0.tag("path") } == ["/ok"], "\(recorded)")
        #expect(
            harness.requests().filter { $0.tag("path") != "/ok" }.isEmpty,
            "the second agent records nothing of the stale configuration"
        )
        await harness.close()
    }

    @Test func instrumentingAgainReusesOneHookAndThereIsNoLimit() async throws {
        let harness = try await CaptureHarness()
        var hooks: Set<ObjectIdentifier> = []
        for _ in 0..<20 {
            let configuration = URLSessionConfiguration.ephemeral
            harness.agent.instrument(configuration, module: "same")
            hooks.insert(ObjectIdentifier(try #require(configuration.protocolClasses?.first)))
        }
        #expect(hooks.count == 1, "the same agent and module share one hook")
        var sessions: [URLSession] = []
        for index in 0..<40 {
            let configuration = URLSessionConfiguration.ephemeral
            harness.agent.instrument(configuration, module: "module-\(index)")
            sessions.append(URLSession(configuration: configuration))
        }
        for session in sessions {
            _ = try await session.data(from: harness.url("/ok"))
        }
        let points = try await harness.waitForRequests(40)
        #expect(Set(points.compactMap { $0.tag("module") }).count == 40, "all 40 configurations are instrumented")
        await harness.close()
    }

    @Test func concurrentRequestsOnOneSessionNeverCrashAndAreAllRecorded() async throws {
        let harness = try await CaptureHarness()
        // 10,000 requests, as in the report of the crash; the ThreadSanitizer run asks for fewer.
        let total = ProcessInfo.processInfo.environment["APIHEALTH_CONCURRENT_REQUESTS"].flatMap { Int($0) } ?? 10_000
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            var started = 0
            var counts: [Int: Int] = [:]
            // Eight at a time, like a service with a bounded pool of callers.
            for _ in 0..<8 {
                let index = started
                started += 1
                group.addTask { try await Self.call(harness, index) }
            }
            while let status = try await group.next() {
                counts[status, default: 0] += 1
                if started < total {
                    let index = started
                    started += 1
                    group.addTask { try await Self.call(harness, index) }
                }
            }
            return counts
        }
        #expect(statuses == [200: (total + 1) / 2, 404: total / 2])
        let points = try await harness.waitForRequests(total)
        #expect(points.count == total)
        await harness.close()
    }

    private static func call(_ harness: CaptureHarness, _ index: Int) async throws -> Int {
        var request = URLRequest(url: harness.url(index % 2 == 0 ? "/ok" : "/status/404"))
        if index % 50 == 0 { request.timeoutInterval = 0.001 }
        do {
            let (_, response) = try await harness.instrumented.data(for: request)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        } catch {
            // A request that timed out at once: the same answer the app would get without the hook.
            let (_, response) = try await harness.plain.data(from: request.url!)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
    }
}
