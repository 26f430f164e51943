import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if !canImport(Darwin)
import Synchronization

/// One request as the app sees it, on Linux, recorded once as a ``RequestSample`` from what the
/// ``ObservingProtocolClient`` of each of its legs reports.
///
/// - **Start**: when the URL loading system made the hook's protocol for the task, right after its
///   cache lookup, before the hop to the task's work queue that `startLoading` comes after.
/// - **End**: when the app hears of it. Where the app's completion handler or delegate is called from
///   the session's delegate queue and that queue runs one operation at a time (what a session makes
///   when given none), the sample is recorded by an operation put on that queue just before
///   swift-corelibs-foundation puts the app's there: it runs right before the app hears of the end,
///   still waits for whatever the queue is busy with, and the agent has the sample first. Where the
///   completion is called inline (the async APIs) or the delegate queue is concurrent, the end is when
///   the protocol reports it, just before the app's completion is called or queued.
/// - **Authentication retries**: a response 401 with a `WWW-Authenticate` header is turned by
///   swift-corelibs-foundation into a challenge for the app's delegate; when it answers with a
///   credential, swift-corelibs-foundation suspends the task, puts in it a protocol of its own for the
///   retry (out of the hook's reach through `protocolClasses`) and resumes it. So the first such 401 is
///   kept, not recorded, and when the hook's protocol is stopped for that suspension the hook puts a
///   client of its own on the retry's protocol before it starts (``followRetry(replacing:)``). The
///   sample is then the retry's outcome, what the app sees, over the whole time. A challenge the app
///   cancels is recorded as the cancellation, one nothing retries as the 401 (when the task is let go).
///   A retry answered 401 again is recorded as that 401: a second retry is not followed.
///
/// What has been seen of the request needs no lock: it has one writer at a time, and the record loop reads it
/// only once it is handed over.
/// - The events come from swift-corelibs-foundation's own protocol (on its transfer's queue), or from
///   `startLoading` and `stopLoading` (on the task's work queue). Every session's queues target one serial
///   queue, which that protocol's own state relies on as well.
/// - The end is claimed once, atomically (`isRecorded`): corelibs can report a failure from another thread
///   (a streamed upload whose body the app's delegate hands over from a thread of its own, failing as the
///   transfer is set up), beside a cancellation on the work queue. Only the thread that claims the end writes
///   it; once it is claimed no event changes anything. Only the hand-over's operation on the delegate queue
///   writes the end's time (`handedOverAfter`), and then queues the request to the agent.
/// - The record loop takes the request from the intake, whose lock it was queued under.
/// - The hook's `deinit` (`abandoned()`) comes after the hook's last call: it is the protocol's last release.
///
/// Linux only: Apple platforms have no such protocol to observe, and re-issue the request (``InnerSession``).
final class CapturedRequest: EndedRequestSource, @unchecked Sendable {
    // @unchecked: `task` is held weakly and only its thread-safe properties are read; what changes is
    // confined as the type's summary says.
    private weak var task: URLSessionTask?
    private let request: URLRequest
    private let registration: CaptureRegistry.Registration
    private let started: ContinuousClock.Instant
    private let startedAt: Date
    private let delivery: CorelibsTask.Delivery
    /// Whether the request sends a body: an upload task's, or the request's own data or stream.
    private let hasBody: Bool

    /// The leg whose client reports now: 0 for the hook's own protocol, 1 for the retry.
    private var leg = 0
    private var firstByte: Duration?
    private var response: HTTPURLResponse?
    private var loadedBytes: UInt64 = 0
    /// The digest of the body delivered so far, with cache advice (``SampleRecorder/digestsBodies``).
    private var digest: BodyDigest?
    /// The end of a leg answered with a challenge: recorded as it is only if nothing retries.
    private var challenged: Ending?
    /// Whether the request's end is claimed: by the first thread that reports it, the only one that writes it.
    private let isRecorded = Atomic<Bool>(false)
    /// How the request ended, once it has: the agent builds its sample from it when it records it.
    private var ending: Ending?
    /// The request's duration as the app hears of its end, when that is on the delegate queue after it ended.
    private var handedOverAfter: Duration?
    /// Whether the loading system answered from its cache (`URLCache`) rather than the network.
    private(set) var servedLocally = false

    /// What the request's sample needs of its end, read as it ends.
    private struct Ending {
        var response: HTTPURLResponse?
        var error: (any Error)?
        var duration: Duration
        /// The task's own counts, read only where they can say more than the client saw (see ``sample``).
        var bytesReceived: Int64
        var bytesSent: Int64
        var bytesExpectedToSend: Int64
    }

    init(
        task: URLSessionTask,
        request: URLRequest,
        registration: CaptureRegistry.Registration,
        started: ContinuousClock.Instant,
        startedAt: Date
    ) {
        self.task = task
        self.request = request
        self.registration = registration
        self.started = started
        self.startedAt = startedAt
        self.delivery = CorelibsTask.delivery(of: task)
        self.hasBody = task is URLSessionUploadTask || request.httpBody != nil || request.httpBodyStream != nil
        if registration.recorder.digestsBodies { digest = BodyDigest() }
    }

    /// Whether an event of leg `leg` is still the request's to take: none is once it is recorded.
    private func takes(_ leg: Int) -> Bool { self.leg == leg && !isRecorded.load(ordering: .acquiring) }

    /// Claims the request's end for the calling thread: `false` when another claimed it first.
    private func claimsEnd() -> Bool {
        isRecorded.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    func responseHead(_ response: URLResponse, leg: Int) {
        guard takes(leg) else { return }
        if firstByte == nil { firstByte = .now - started }
        self.response = response as? HTTPURLResponse
    }

    /// The loading system found its cached response valid and answers with it: no network answer.
    func answeredFromCache(leg: Int) {
        guard takes(leg) else { return }
        servedLocally = true
    }

    /// Part of the body arrived: counted, and with cache advice digested as it passes (never kept).
    func loaded(_ data: Data, leg: Int) {
        guard takes(leg) else { return }
        loadedBytes += UInt64(data.count)
        if digest != nil { data.withUnsafeBytes { digest?.update($0) } }
    }

    /// Leg `leg` finished: the request's end, unless it is the first and swift-corelibs-foundation
    /// turns it into a challenge. Called before the protocol's client hears of it.
    func finished(leg: Int) {
        guard takes(leg) else { return }
        let ending = ending(response: response ?? responseAsLegFinishes(), error: nil)
        if leg == 0 && Self.isChallenge(ending.response) {
            challenged = ending
            return
        }
        end(as: ending)
    }

    /// The request failed, or was cancelled (`leg` is `nil` when the hook's protocol was stopped: the
    /// task was cancelled, whatever leg it was on).
    func failed(_ error: any Error, leg: Int?) {
        guard takes(leg ?? self.leg) else { return }
        end(as: ending(response: response ?? task?.response as? HTTPURLResponse, error: error))
    }

    /// Records the request as `ending` says: nothing changes it after this.
    private func end(as ending: Ending) {
        guard claimsEnd() else { return }
        self.ending = ending
        handOver()
    }

    /// The task's response as a leg finishes (called from the client's `urlProtocolDidFinishLoading`). A client
    /// is told of the response only where the task has a delegate; else it is on the task alone.
    private func responseAsLegFinishes() -> HTTPURLResponse? {
        guard let task else { return nil }
        if let response = CorelibsTask.responseAsLegFinishes(of: task) { return response as? HTTPURLResponse }
        return task.response as? HTTPURLResponse
    }

    /// The end of the request as it stands, now. Each of the task's properties read here is a synchronous hop
    /// onto the task's queue, so each is read only where it can say more: the bytes received when none came
    /// through the client, the bytes sent when the request has a body (an upload task's, or the request's data
    /// or stream).
    private func ending(response: HTTPURLResponse?, error: (any Error)?) -> Ending {
        Ending(
            response: response,
            error: error,
            duration: .now - started,
            bytesReceived: loadedBytes > 0 ? 0 : max(0, task?.countOfBytesReceived ?? 0),
            bytesSent: hasBody ? max(0, task?.countOfBytesSent ?? 0) : 0,
            bytesExpectedToSend: hasBody && error == nil ? max(0, task?.countOfBytesExpectedToSend ?? 0) : 0
        )
    }

    /// Called on the task's work queue when the hook's protocol is stopped because the task is
    /// suspended. After a challenge the app answered with a credential, swift-corelibs-foundation
    /// suspends the task, then, from the thread that answered, puts the retry's protocol in it and
    /// resumes it; resuming waits for this work queue, so the retry's protocol cannot start before
    /// this returns. This waits for it to be put in the task (microseconds; at most a quarter of a
    /// second, for a task the app suspended itself meanwhile) and puts a client of the hook's on it.
    func followRetry(replacing current: URLProtocol) {
        guard let task, leg == 0, challenged != nil, !isRecorded.load(ordering: .acquiring) else { return }
        let deadline = ContinuousClock.now + .milliseconds(250)
        while true {
            switch CorelibsTask.protocolInUse(by: task) {
            case .existing(let retry) where retry !== current:
                guard let client = retry.client, !(client is ObservingProtocolClient) else { return }
                leg = 1
                challenged = nil
                firstByte = nil
                response = nil
                loadedBytes = 0
                if digest != nil { digest = BodyDigest() }
                retry.client = ObservingProtocolClient(forwardingTo: client, request: self, leg: 1)
                return
            case .unreadable:
                return
            case .existing, .none:
                if task.state != .suspended || ContinuousClock.now >= deadline { return }
                usleep(20)
            }
        }
    }

    /// The hook's protocol was let go: a challenge still kept (nothing retried it) stands as the 401.
    func abandoned() {
        guard let challenged, leg == 0, claimsEnd() else { return }
        ending = challenged
        registration.recorder.recordEnded(self)
    }

    /// Whether swift-corelibs-foundation answers `response` with an authentication challenge rather
    /// than handing it to the app (as it does for a 401 with a `WWW-Authenticate` header).
    private static func isChallenge(_ response: HTTPURLResponse?) -> Bool {
        guard let response, response.statusCode == 401 else { return false }
        return response.allHeaderFields["WWW-Authenticate"] != nil
    }

    /// The request's sample, built when the agent records it, from its end.
    func makeSample(correlationHeaders: [String]) -> RequestSample? {
        guard var ending else { return nil }
        if let handedOverAfter { ending.duration = handedOverAfter }
        return sample(firstByte: firstByte, loadedBytes: loadedBytes, ending, correlationHeaders: correlationHeaders)
    }

    func requestHeader(_ name: String) -> String? { request.value(forHTTPHeaderField: name) }

    /// The body bytes digested so far; `nil` without cache advice, when no byte of the body is read.
    var digestedBytes: UInt64? { digest?.length }

    /// What the cache advisor reads of the response: its headers, and its body's digest when the body
    /// was delivered to its end (a request that failed or was cancelled has none).
    func cacheEvidence() -> CacheEvidence? {
        guard let ending, let response = ending.response else { return nil }
        let policy = CachePolicy(
            method: request.httpMethod ?? "GET",
            statusCode: response.statusCode,
            requestHeader: { request.value(forHTTPHeaderField: $0) },
            header: { response.value(forHTTPHeaderField: $0) }
        )
        return CacheEvidence(policy: policy, digest: ending.error == nil ? digest : nil)
    }

    func responseHeader(_ name: String) -> String? {
        ending?.response.flatMap { CorrelationID.find(in: $0, headers: [name]) }
    }

    var urlRequest: URLRequest? { request }

    /// The sample of the request that ended as `ending` says.
    ///
    /// Byte counts are what swift-corelibs-foundation lets a protocol see. Response: the body as
    /// delivered through the client, else the bytes counted on the task, else the response's
    /// `Content-Length`. Request: the body bytes the task counted as sent (it counts them for tasks
    /// with a delegate), else, once the request has succeeded, the body's length when it is known
    /// (data and files), else, for a body stream, the request's `Content-Length` header: the length
    /// the app declared, since a stream's bytes are not counted where there is no delegate. A stream
    /// without that header counts 0.
    private func sample(
        firstByte: Duration?,
        loadedBytes: UInt64,
        _ ending: Ending,
        correlationHeaders: [String]
    ) -> RequestSample {
        var sample = RequestSample(
            method: request.httpMethod ?? "GET",
            url: request.url ?? URL(fileURLWithPath: "/"),
            module: registration.module,
            startedAt: startedAt,
            duration: ending.duration
        )
        sample.timeToFirstByte = firstByte
        if let error = ending.error {
            sample.error = RequestSample.TransportError(error)
        } else {
            sample.statusCode = ending.response?.statusCode
        }
        let announced = ending.error == nil ? max(0, ending.response?.expectedContentLength ?? 0) : 0
        sample.responseBytes = max(loadedBytes, UInt64(max(ending.bytesReceived, Int64(announced))))
        var sent = max(ending.bytesSent, ending.bytesExpectedToSend)
        if hasBody, ending.error == nil, sent == 0, request.httpBodyStream != nil,
            let declared = request.value(forHTTPHeaderField: "Content-Length").flatMap({ Int64($0) })
        {
            sent = max(0, declared)
        }
        sample.requestBytes = UInt64(sent)
        sample.redirectCount = nil
        sample.correlationID = CorrelationID.find(
            in: request,
            response: ending.response,
            headers: correlationHeaders
        )
        return sample
    }

    /// Hands the ended request to the agent as the app hears of the end (see the type's summary): from the
    /// serial delegate queue, its duration then ending as that queue gets to it, or at once. The agent builds
    /// its sample off this path (``makeSample(correlationHeaders:)``).
    private func handOver() {
        let recorder = registration.recorder
        guard let queue = delivery.serialDelegateQueue, !delivery.callsCompletionInline else {
            recorder.recordEnded(self)
            return
        }
        queue.addOperation { [self] in
            handedOverAfter = .now - started
            recorder.recordEnded(self)
        }
    }
}
#endif
