import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose sample is built (for a `.request` one) and recorded at the next drain of the
/// ``CaptureQueue``.
struct DeferredSample {
    enum Source {
        /// A URLSession task's sample and request; boxed, so the queue's entries stay two words wide.
        indirect case sample(RequestSample, URLRequest)
        case request(any EndedRequestSource)
    }

    let now: Duration
    let source: Source

    /// The sample; a `.request` one finds its correlation id among `correlationHeaders`.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        switch source {
        case .sample(let sample, _): sample
        case .request(let request): request.makeSample(correlationHeaders: correlationHeaders)
        }
    }

    /// What the capture filter sees of the request.
    var request: SentRequest {
        switch source {
        case .sample(_, let request): SentRequest(request)
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
}

/// The capture queue: ended requests wait here, off the request's own path, until they are recorded.
/// Queuing takes one short lock and allocates nothing; a drain takes them all, in the order they came.
///
/// ```swift
/// let queue = CaptureQueue()
/// _ = queue.enqueue(DeferredSample(now: clock.coarseNow, source: .request(observation)))
/// queue.drain { deferred in recorder.record(deferred) }
/// ```
final class CaptureQueue: Sendable {
    /// Guards the samples waiting, and whether the queue has closed (later samples are refused).
    private let waiting = Locked((samples: [DeferredSample](), isClosed: false))
    /// Held while a drain runs, so drains keep the samples' order and a reader waits for a drain under
    /// way; a recording thread never waits for it (it leaves the drain to the one running). Guards the
    /// number of drains run. (A value, not `Void`: ThreadSanitizer takes a `Void` state's address,
    /// which is the object's own, for a write.) The lock order is on `APIHealthAgent.lifecycle`.
    private let drainInProgress = Locked<UInt64>(0)
    /// Samples waiting at most: the caller that queues the last one drains them all on its own thread.
    static let maximumWaiting = 512

    /// Queues `sample`. Returns how many wait now, or `nil` once the queue has closed.
    func enqueue(_ sample: DeferredSample) -> Int? {
        waiting.withLock { queue -> Int? in
            if queue.isClosed { return nil }
            queue.samples.append(sample)
            return queue.samples.count
        }
    }

    /// Hands every waiting sample to `record`, in the order they were queued. With
    /// `waitingForOneUnderWay` false, returns at once when another drain is under way (it, or the
    /// next, takes these samples).
    func drain(waitingForOneUnderWay: Bool = true, _ record: (DeferredSample) -> Void) {
        let drain = { (drains: inout UInt64) in
            drains &+= 1
            let samples = self.waiting.withLock { queue -> [DeferredSample] in
                guard !queue.samples.isEmpty else { return [] }
                // The next queue starts with room for as many as this one held.
                var taken: [DeferredSample] = []
                taken.reserveCapacity(queue.samples.count)
                swap(&taken, &queue.samples)
                return taken
            }
            for sample in samples { record(sample) }
        }
        if waitingForOneUnderWay {
            drainInProgress.withLock(drain)
        } else {
            drainInProgress.withLockIfAvailable(drain)
        }
    }

    /// Whether no sample waits.
    var isEmpty: Bool { waiting.withLock { $0.samples.isEmpty } }

    /// Refuses later samples.
    func close() {
        waiting.withLock { $0.isClosed = true }
    }
}
