import Foundation
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if !canImport(Darwin)
/// One URLSession request as the Linux hook follows it, driven by hand: what its protocol's client
/// reports (a head, bytes, the end of a leg, a failure) and the sample built from that, without a
/// request on the network. The task is made and never resumed.
@Suite struct CapturedRequestTests {
    /// The agent's side of the hook: keeps every ended request it is handed.
    private final class Recorder: SampleRecorder {
        let ended = Locked<[any EndedRequestSource]>([])
        var isAlive: Bool { true }
        var owner: AnyObject? { nil }
        var isCapturing: Bool { true }
        let digestsBodies: Bool
        init(digestsBodies: Bool = false) { self.digestsBodies = digestsBodies }
        var correlationHeaders: [String] { ["X-Request-ID"] }
        func isExcluded(_ url: URL) -> Bool { false }
        func record(_ sample: RequestSample, request: URLRequest, cacheEvidence: CacheEvidence?) {}
        func recordEnded(_ request: any EndedRequestSource) { ended.withLock { $0.append(request) } }
        func observeCountry(in response: HTTPURLResponse?) {}
        func countUncaptured() {}
        var count: Int { ended.withLock { $0.count } }
    }

    private static let url = URL(string: "http://127.0.0.1:9/orders/42")!

    /// A request on a session whose delegate queue runs operations at once side by side, so the end
    /// is handed over on the thread that reports it.
    private static func captured(_ recorder: Recorder) -> CapturedRequest {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 4
        let session = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: queue)
        return captured(recorder, session: session)
    }

    private static func captured(_ recorder: Recorder, session: URLSession) -> CapturedRequest {
        var request = URLRequest(url: url)
        request.setValue("req-7", forHTTPHeaderField: "X-Request-ID")
        return CapturedRequest(
            task: session.dataTask(with: request),
            request: request,
            registration: CaptureRegistry.Registration(module: "orders", recorder: recorder, innerSession: nil),
            started: .now,
            startedAt: Date()
        )
    }

    private static func response(_ status: Int, headers: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    /// The body is digested as it is delivered only where the agent gives cache advice; a failed request's
    /// digest is never evidence.
    @Test func theBodyIsDigestedOnlyWithCacheAdvice() throws {
        for digests in [false, true] {
            let request = Self.captured(Recorder(digestsBodies: digests))
            request.responseHead(Self.response(200, headers: ["Cache-Control": "no-store"]), leg: 0)
            request.loaded(Data(repeating: 7, count: 10), leg: 0)
            request.loaded(Data(repeating: 7, count: 5), leg: 0)
            #expect(request.digestedBytes == (digests ? 15 : nil))
            request.finished(leg: 0)
            let evidence = try #require(request.cacheEvidence())
            #expect(evidence.policy.noStore && !evidence.policy.storable && evidence.policy.cacheableResponse)
            #expect((evidence.digest != nil) == digests)
        }
        let failed = Self.captured(Recorder(digestsBodies: true))
        failed.responseHead(Self.response(200), leg: 0)
        failed.loaded(Data(count: 3), leg: 0)
        failed.failed(URLError(.networkConnectionLost), leg: 0)
        #expect(failed.cacheEvidence()?.digest == nil)
    }

    @Test func anEndedRequestIsHandedOverOnceWithWhatItsClientSaw() throws {
        let recorder = Recorder()
        let request = Self.captured(recorder)
        #expect(request.makeSample(correlationHeaders: ["X-Request-ID"]) == nil, "no sample before the end")
        request.responseHead(Self.response(200, headers: ["X-Country": "NL"]), leg: 0)
        request.loaded(Data(count: 10), leg: 0)
        request.loaded(Data(count: 5), leg: 0)
        request.finished(leg: 0)
        request.finished(leg: 0)
        request.failed(URLError(.cancelled), leg: nil)
        #expect(recorder.count == 1, "handed over once, whatever reports the end again")
        let sample = try #require(request.makeSample(correlationHeaders: ["X-Request-ID"]))
        #expect(sample.statusCode == 200 && sample.error == nil)
        #expect(sample.responseBytes == 15)
        #expect(sample.timeToFirstByte != nil)
        #expect(sample.module == "orders" && sample.method == "GET")
        #expect(sample.correlationID == "req-7")
        #expect(request.responseHeader("x-country") == "NL")
        #expect(request.requestHeader("X-Request-ID") == "req-7")
    }

    /// Once handed over, the request is the record loop's to read: a report that comes after its end (a
    /// late chunk, a head, a cached answer) changes nothing of what the sample is built from.
    @Test func reportsAfterTheEndChangeNothing() throws {
        let recorder = Recorder(digestsBodies: true)
        let request = Self.captured(recorder)
        request.responseHead(Self.response(200), leg: 0)
        request.loaded(Data(count: 10), leg: 0)
        request.failed(URLError(.cancelled), leg: nil)
        request.loaded(Data(count: 7), leg: 0)
        request.responseHead(Self.response(500), leg: 0)
        request.answeredFromCache(leg: 0)
        #expect(recorder.count == 1)
        let sample = try #require(request.makeSample(correlationHeaders: []))
        #expect(sample.responseBytes == 10)
        #expect(request.digestedBytes == 10)
        #expect(!request.servedLocally)
    }

    /// corelibs can report a failure from a thread of the app's (a streamed upload's body handed over from
    /// it) while the work queue stops the task: whichever claims the end first records it, once.
    @Test func endsReportedOnTwoThreadsAtOnceAreHandedOverOnce() throws {
        let recorder = Recorder()
        let requests = (0..<500).map { _ in Self.captured(recorder) }
        for request in requests {
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                if thread == 0 {
                    request.failed(URLError(.cannotConnectToHost), leg: 0)
                } else {
                    request.failed(URLError(.cancelled), leg: nil)
                }
            }
        }
        #expect(recorder.count == requests.count)
        let handedOver = recorder.ended.withLock { $0.map(ObjectIdentifier.init) }
        #expect(Set(handedOver).count == requests.count, "each request handed over once")
        for request in requests {
            let sample = try #require(request.makeSample(correlationHeaders: []))
            #expect(sample.error != nil && sample.statusCode == nil)
        }
    }

    @Test func aFailureIsRecordedAsItsTransportError() throws {
        let recorder = Recorder()
        let request = Self.captured(recorder)
        request.failed(URLError(.timedOut), leg: 0)
        #expect(recorder.count == 1)
        let sample = try #require(request.makeSample(correlationHeaders: []))
        #expect(sample.statusCode == nil)
        #expect(sample.error != nil)
    }

    @Test func reportsOfAnotherLegAreIgnored() {
        let recorder = Recorder()
        let request = Self.captured(recorder)
        request.responseHead(Self.response(500), leg: 1)
        request.loaded(Data(count: 99), leg: 1)
        request.finished(leg: 1)
        #expect(recorder.count == 0, "leg 1 is followed only after a challenge")
        request.finished(leg: 0)
        #expect(recorder.count == 1)
        let sample = request.makeSample(correlationHeaders: [])
        #expect(sample?.statusCode == nil && sample?.responseBytes == 0, "nothing of leg 1 is kept")
    }

    @Test func aChallengeIsRecordedAsTheUnauthorizedResponseOnlyWhenNothingRetriesIt() throws {
        let recorder = Recorder()
        let request = Self.captured(recorder)
        request.responseHead(Self.response(401, headers: ["WWW-Authenticate": "Basic realm=\"api\""]), leg: 0)
        request.finished(leg: 0)
        #expect(recorder.count == 0, "kept: the app's delegate may answer it with a credential")
        request.abandoned()
        request.abandoned()
        #expect(recorder.count == 1)
        #expect(try #require(request.makeSample(correlationHeaders: [])).statusCode == 401)
    }

    @Test func anUnauthorizedResponseWithoutAChallengeEndsTheRequest() throws {
        let recorder = Recorder()
        let request = Self.captured(recorder)
        request.responseHead(Self.response(401), leg: 0)
        request.finished(leg: 0)
        #expect(recorder.count == 1)
        #expect(try #require(request.makeSample(correlationHeaders: [])).statusCode == 401)
    }

    /// On a session with a serial delegate queue, the end is handed over by an operation on that queue:
    /// right before the app's completion, which swift-corelibs-foundation puts there next.
    @Test func onASerialDelegateQueueTheEndIsHandedOverFromThatQueue() {
        let recorder = Recorder()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: queue)
        let request = Self.captured(recorder, session: session)
        queue.isSuspended = true
        request.finished(leg: 0)
        #expect(recorder.count == 0, "waits for the delegate queue")
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(recorder.count == 1)
    }
}
#endif
