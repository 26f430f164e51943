import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose sample is built (for a `.request` one) and recorded at the next drain of the
/// ``CaptureQueue``.
struct DeferredSample {
    enum Source {
        /// A URLSession task's sample and request, and what the cache advisor reads of its response
        /// when it advises; boxed, so the queue's entries stay two words wide.
        indirect case sample(RequestSample, URLRequest, CacheEvidence?)
        case request(any EndedRequestSource)
    }

    let now: Duration
    let source: Source

    /// The sample; a `.request` one finds its correlation id among `correlationHeaders`.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        switch source {
        case .sample(let sample, _, _): sample
        case .request(let request): request.makeSample(correlationHeaders: correlationHeaders)
        }
    }

    /// The value of the response's header `name`, where the request's end kept its response (a sample
    /// built by the platform's metrics carries none).
    func responseHeader(_ name: String) -> String? {
        switch source {
        case .sample: nil
        case .request(let request): request.responseHeader(name)
        }
    }

    /// Whether a local cache served the response rather than the network (see
    /// ``EndedRequestSource/servedLocally``).
    var servedLocally: Bool {
        switch source {
        case .sample(_, _, let evidence): evidence?.servedLocally ?? false
        case .request(let request): request.servedLocally
        }
    }

    /// What the cache advisor reads of the response (see ``EndedRequestSource/cacheEvidence()``).
    func cacheEvidence() -> CacheEvidence? {
        switch source {
        case .sample(_, _, let evidence): evidence
        case .request(let request): request.cacheEvidence()
        }
    }

    /// The request as URLSession sent it (URLSession capture); `nil` for other clients'.
    var urlRequest: URLRequest? {
        switch source {
        case .sample(_, let request, _): request
        case .request(let request): request.urlRequest
        }
    }

    /// What the capture filter sees of the request.
    var request: SentRequest {
        switch source {
        case .sample(_, let request, _): SentRequest(request)
        case .request(let request): SentRequest(request)
        }
    }
}

/// A request that has ended and builds its own sample when the agent records it (see
/// `APIHealthAgent.recordLater(_:)`): queuing one allocates nothing.
package protocol EndedRequestSource: AnyObject, Sendable {
    /// The request's sample, its correlation id the first of `correlationHeaders` it carries; `nil`
    /// to record nothing.
    func makeSample(correlationHeaders: [String]) -> RequestSample?
    /// The value of the request's header `name` (any case), for the capture filter.
    func requestHeader(_ name: String) -> String?
    /// The value of the response's header `name` (any case), `nil` without a response; the country
    /// header is read through it (``APIHealthConfiguration/CaptureOptions/countryHeader``); `nil` (the
    /// default) for a source that keeps no response.
    func responseHeader(_ name: String) -> String?
    /// The request as URLSession sent it, for URLSession capture; `nil` (the default) otherwise.
    var urlRequest: URLRequest? { get }
    /// What the cache advisor reads of the response: asked only when the agent advises
    /// (``APIHealthConfiguration/CaptureOptions/cacheAdvice``), of a source that digested the body as it
    /// streamed (``APIHealthAgent/digestsBodies``); `nil` (the default) without a response.
    func cacheEvidence() -> CacheEvidence?
    /// Whether a local cache (`URLCache`) served the response rather than the network: its `Date` is then
    /// no reading of the clock; `false` (the default) where no local cache answers.
    var servedLocally: Bool { get }
}

extension EndedRequestSource {
    package var urlRequest: URLRequest? { nil }
    package func responseHeader(_ name: String) -> String? { nil }
    package func cacheEvidence() -> CacheEvidence? { nil }
    package var servedLocally: Bool { false }
}

/// The capture queue: ended requests wait here, off the request's own path, until they are recorded.
/// Queuing takes one short lock and allocates nothing; a drain takes them all, in the order they came.
///
/// One drain runs at a time, so samples are recorded in the order they were queued, and no lock is
/// held while a drain records them: recording runs the capture filter, which is the user's code and
/// may read the agent (a drain it starts on the same thread returns at once: the drain under way
/// records what waits).
///
/// ```swift
/// let queue = CaptureQueue()
/// _ = queue.enqueue(DeferredSample(now: clock.coarseNow, source: .request(observation)))
/// queue.drain { deferred in recorder.record(deferred) }
/// ```
final class CaptureQueue: Sendable {
    private struct State {
        var samples: [DeferredSample] = []
        /// Later samples are refused.
        var isClosed = false
        /// The thread of the drain under way, if one is.
        var drainer: pthread_t?
    }

    /// Guards the samples waiting, whether the queue has closed and which thread drains.
    private let state = Locked(State())
    /// Entered by the drain under way, for a reader that must wait for it to end: a synchronous wait
    /// (readers such as `flush()` are not async), with no lock of its own to order.
    private let drainUnderWay = DispatchGroup()
    /// Samples waiting at most: the caller that queues the last one drains them all on its own thread.
    static let maximumWaiting = 512

    /// Queues `sample`. Returns how many wait now, or `nil` once the queue has closed.
    func enqueue(_ sample: DeferredSample) -> Int? {
        state.withLock { state -> Int? in
            if state.isClosed { return nil }
            state.samples.append(sample)
            return state.samples.count
        }
    }

    private enum Turn {
        case drain([DeferredSample])
        case waitForTheDrainUnderWay
        case leave
    }

    /// Hands every waiting sample to `record`, in the order they were queued. With
    /// `waitingForOneUnderWay` false, returns at once when another drain is under way (it, or the
    /// next, takes these samples); with it true, waits for that drain to end, then drains what waits.
    func drain(waitingForOneUnderWay: Bool = true, _ record: (DeferredSample) -> Void) {
        let thread = pthread_self()
        while true {
            let turn = state.withLock { state -> Turn in
                if let drainer = state.drainer {
                    // A drain started from within the one under way on this thread (its filter read
                    // the agent) leaves the samples to it.
                    if !waitingForOneUnderWay || pthread_equal(drainer, thread) != 0 { return .leave }
                    return .waitForTheDrainUnderWay
                }
                guard !state.samples.isEmpty else { return .leave }
                state.drainer = thread
                drainUnderWay.enter()
                // The next queue starts with room for as many as this one held.
                var taken: [DeferredSample] = []
                taken.reserveCapacity(state.samples.count)
                swap(&taken, &state.samples)
                return .drain(taken)
            }
            switch turn {
            case .leave:
                return
            case .waitForTheDrainUnderWay:
                drainUnderWay.wait()
            case .drain(let samples):
                for sample in samples { record(sample) }
                state.withLock { $0.drainer = nil }
                drainUnderWay.leave()
                return
            }
        }
    }

    /// Whether no sample waits.
    var isEmpty: Bool { state.withLock { $0.samples.isEmpty } }

    /// Refuses later samples.
    func close() {
        state.withLock { $0.isClosed = true }
    }
}
