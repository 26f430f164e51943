import Foundation
import LineProtocol

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose sample is built (for a `.request` one) and recorded by the record loop, in its turn
/// through the ``RecordIntake``.
struct DeferredSample {
    enum Source {
        /// A URLSession task's sample and request, and what the cache advisor reads of its response
        /// when it advises; boxed, so the queue's entries stay two words wide.
        indirect case sample(RequestSample, URLRequest, CacheEvidence?)
        case request(any EndedRequestSource)
        /// A sample given to ``APIHealthAgent/record(_:)``, with no request to show the capture filter: the
        /// next of its round's ``IntakeRound/samples``, where it waits inline (no box to allocate).
        case recorded
        /// A response the app could not parse (``APIHealthAgent/recordParseFailure(method:url:statusCode:error:module:data:)``):
        /// its point is made by the loop, whose learners template its path.
        case parseFailure(ParseFailureReport)
        /// The end of an aggregation interval: the loop takes the interval points, which count every
        /// request queued before it.
        case intervalEnd(IntervalEnd)
        /// The country header's value in a response whose sample comes without it (the Apple platforms'
        /// hook, which reads it as the response arrives): the loop's ``CountryLearner`` takes it. Boxed, so
        /// that every payload stays one reference and copying an entry stays a retain.
        indirect case countryHeader(String)
    }

    let now: Duration
    let source: Source

    /// The sample of a `.sample` or `.request` one (which finds its correlation id among
    /// `correlationHeaders`); a `.recorded` one's is its round's.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        switch source {
        case .sample(let sample, _, _): sample
        case .request(let request): request.makeSample(correlationHeaders: correlationHeaders)
        case .recorded, .parseFailure, .intervalEnd, .countryHeader: nil
        }
    }

    /// The value of the response's header `name`, where the request's end kept its response (a sample
    /// built by the platform's metrics carries none).
    func responseHeader(_ name: String) -> String? {
        switch source {
        case .sample, .recorded, .parseFailure, .intervalEnd, .countryHeader: nil
        case .request(let request): request.responseHeader(name)
        }
    }

    /// Whether a local cache served the response rather than the network (see
    /// ``EndedRequestSource/servedLocally``).
    var servedLocally: Bool {
        switch source {
        case .sample(_, _, let evidence): evidence?.servedLocally ?? false
        case .request(let request): request.servedLocally
        case .recorded, .parseFailure, .intervalEnd, .countryHeader: false
        }
    }

    /// What the cache advisor reads of the response (see ``EndedRequestSource/cacheEvidence()``).
    func cacheEvidence() -> CacheEvidence? {
        switch source {
        case .sample(_, _, let evidence): evidence
        case .request(let request): request.cacheEvidence()
        case .recorded, .parseFailure, .intervalEnd, .countryHeader: nil
        }
    }

    /// The request as URLSession sent it (URLSession capture); `nil` for other clients'.
    var urlRequest: URLRequest? {
        switch source {
        case .sample(_, let request, _): request
        case .request(let request): request.urlRequest
        case .recorded, .parseFailure, .intervalEnd, .countryHeader: nil
        }
    }

    /// What the capture filter sees of the request.
    var request: SentRequest {
        switch source {
        case .sample(_, let request, _): SentRequest(request)
        case .request(let request): SentRequest(request)
        case .recorded, .parseFailure, .intervalEnd, .countryHeader: SentRequest()
        }
    }
}

/// What the loop takes from the intake at once: the requests, in the order they came, and the samples
/// given whole (``APIHealthAgent/record(_:)``), in the order of the requests' `.recorded` entries (each
/// read as the loop records it, and destroyed with the round).
struct IntakeRound {
    var requests: [DeferredSample] = []
    var samples: [RequestSample] = []

    var isEmpty: Bool { requests.isEmpty }

    /// Empties the round, keeping its buffers for the next one unless a burst grew them past a few
    /// rounds' worth (a sample is a few hundred bytes: a full intake's would stay resident).
    mutating func removeAll() {
        let keeps = requests.capacity <= 2 * RecordIntake.wakeAt
        requests.removeAll(keepingCapacity: keeps)
        samples.removeAll(keepingCapacity: keeps && samples.capacity <= 2 * RecordIntake.wakeAt)
    }
}

/// A parse failure the app reported, as the loop makes its point.
final class ParseFailureReport: Sendable {
    let url: URL
    let method: String
    let module: String
    let statusCode: Int?
    let kind: ParseFailureKind
    let codingPath: String
    let at: Date

    init(
        url: URL,
        method: String,
        module: String,
        statusCode: Int?,
        kind: ParseFailureKind,
        codingPath: String,
        at: Date
    ) {
        (self.url, self.method, self.module, self.statusCode) = (url, method, module, statusCode)
        (self.kind, self.codingPath, self.at) = (kind, codingPath, at)
    }
}

/// The end of an aggregation interval, queued like a request: the loop takes the interval points in
/// order with the requests, so every request queued before it is counted in the interval.
///
/// `@unchecked Sendable` because the loop writes ``points`` before it counts the entry recorded, and the
/// thread that queued it reads them only after ``RecordIntake/catchUp()`` has returned (the intake's
/// lock orders the two).
final class IntervalEnd: @unchecked Sendable {
    /// What the interval points are stamped.
    let stamp: Timestamp
    /// The points the loop took (none until it has).
    var points: [Point] = []

    init(stamp: Timestamp) { self.stamp = stamp }
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

/// The record stage's one intake: ended requests wait here, off the request's own path, until the record
/// loop (``RecordLoop``) takes them, in the order they came. It is the only lock a recording thread takes:
/// queuing one request takes it once and allocates nothing.
///
/// The loop takes what waits in rounds: at once when a reader asks for it (``catchUp()``), when
/// ``wakeAt`` requests wait, or when intake closes; otherwise ``roundInterval`` after the first request
/// of the round came, so that a busy service wakes the loop about 50 times a second and an idle one
/// never. A reader that must see every request (the metrics, a flush, a send) asks the loop to catch up
/// and waits until it has recorded everything queued before it asked.
///
/// Bounded: a recording thread that finds ``capacity`` requests waiting waits for the loop to make room
/// (the loop records about a million requests a second on one core, so only a caller recording faster
/// than that ever waits), and nothing is dropped while intake is open.
///
/// ```swift
/// let intake = RecordIntake()
/// _ = intake.enqueue(DeferredSample(now: clock.coarseNow, source: .request(observation)))
/// intake.catchUp()   // returns once the loop has recorded it
/// ```
final class RecordIntake: @unchecked Sendable {
    /// Guards every stored property below; the loop and the readers wait on it.
    private let condition = NSCondition()
    /// What the lock guards, kept behind a pointer: a class's stored properties would be checked for
    /// exclusive access at run time on every access, and every access here is under the lock.
    private struct State {
        /// The requests waiting, in the order they came.
        var waiting = IntakeRound()
        /// The buffers the loop handed back after its last round: the next round's, so rounds allocate nothing.
        var spare = IntakeRound()
        /// Requests queued, and recorded by the loop, since the intake was made.
        var queued: UInt64 = 0
        var recorded: UInt64 = 0
        /// Readers waiting for the loop to catch up.
        var readersWaiting = 0
        /// Later requests are refused.
        var isClosed = false
        /// Whether the loop's thread was started; its thread, once it runs; and whether it has returned.
        var loopStarted = false
        var loopThread: pthread_t?
        var loopEnded = false
        /// Whether the loop waits with nothing queued (a request queued then wakes it).
        var loopIdle = false
        /// Starts the loop's thread, at the first request queued: an agent that records nothing makes none.
        var startLoop: ((RecordIntake) -> Void)?
    }
    private let state: UnsafeMutablePointer<State> = {
        let state = UnsafeMutablePointer<State>.allocate(capacity: 1)
        state.initialize(to: State())
        return state
    }()

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Requests waiting that wake the loop at once.
    static let wakeAt = 512
    /// Requests waiting at most before a recording thread waits for room.
    static let capacity = 16_384
    /// How long a round gathers requests after the first one came.
    static let roundInterval = Duration.milliseconds(20)

    /// Says how the loop is started, at the first request queued: on a thread of its own that calls
    /// ``nextRound(into:)`` and ``roundRecorded(_:)`` until the first returns `false`.
    func startsLoop(with start: @escaping (RecordIntake) -> Void) {
        condition.lock()
        defer { condition.unlock() }
        state.pointee.startLoop = start
    }

    /// Queues `sample`. Returns `false` once intake has closed.
    func enqueue(_ sample: DeferredSample) -> Bool {
        guard lockForEnqueue() else { return false }
        state.pointee.waiting.requests.append(sample)
        unlockAfterEnqueue()
        return true
    }

    /// Queues a sample given whole, which waits inline (moved, not boxed). Returns `false` once intake
    /// has closed.
    func enqueue(recorded sample: consuming RequestSample, now: Duration) -> Bool {
        guard lockForEnqueue() else { return false }
        state.pointee.waiting.requests.append(DeferredSample(now: now, source: .recorded))
        state.pointee.waiting.samples.append(consume sample)
        unlockAfterEnqueue()
        return true
    }

    /// Takes the lock once there is room; `false`, with the lock given back, once intake has closed.
    @inline(__always)
    private func lockForEnqueue() -> Bool {
        condition.lock()
        // Room is made only by the loop: its own thread (a capture filter recording) never waits for it.
        while !state.pointee.isClosed, state.pointee.waiting.requests.count >= Self.capacity, !isLoopThread {
            condition.wait()
        }
        if state.pointee.isClosed {
            condition.unlock()
            return false
        }
        return true
    }

    /// Counts the request just queued, wakes the loop if it must, and gives the lock back; the loop's
    /// thread is made at the first request, outside the lock (it takes the lock for its first round).
    @inline(__always)
    private func unlockAfterEnqueue() {
        state.pointee.queued &+= 1
        var startingLoop: ((RecordIntake) -> Void)?
        if !state.pointee.loopStarted, let startLoop = state.pointee.startLoop {
            state.pointee.loopStarted = true
            startingLoop = startLoop
        } else if (state.pointee.loopIdle && state.pointee.waiting.requests.count == 1)
            || state.pointee.waiting.requests.count == Self.wakeAt
        {
            condition.broadcast()
        }
        condition.unlock()
        startingLoop?(self)
    }

    /// For the loop: waits until a round is due, then swaps what waits into `round` (which must be
    /// empty) and returns `true`; returns `false`, with nothing taken, once intake has closed and
    /// nothing waits.
    func nextRound(into round: inout IntakeRound) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        state.pointee.loopThread = pthread_self()
        var deadline: Date?
        while true {
            if state.pointee.waiting.isEmpty {
                if state.pointee.isClosed {
                    state.pointee.loopEnded = true
                    condition.broadcast()
                    return false
                }
                deadline = nil
                state.pointee.loopIdle = true
                condition.wait()
                state.pointee.loopIdle = false
                continue
            }
            if state.pointee.readersWaiting > 0 || state.pointee.isClosed
                || state.pointee.waiting.requests.count >= Self.wakeAt
            {
                break
            }
            let due = deadline ?? Date(timeIntervalSinceNow: Double(Self.roundInterval.nanoseconds) / 1e9)
            deadline = due
            if !condition.wait(until: due) { break }
        }
        swap(&round, &state.pointee.waiting)
        swap(&state.pointee.waiting, &state.pointee.spare)
        return true
    }

    /// For the loop: the round it took is recorded; `round` (emptied, its capacity kept) is the next one's.
    func roundRecorded(_ round: inout IntakeRound) {
        let count = round.requests.count
        round.removeAll()
        condition.lock()
        defer { condition.unlock() }
        state.pointee.recorded &+= UInt64(count)
        swap(&state.pointee.spare, &round)
        // Readers waiting for this round, and recording threads waiting for room.
        condition.broadcast()
    }

    /// Returns once the loop has recorded every request queued before the call. From the loop's own
    /// thread (a capture filter that reads the agent) it returns at once: the round under way records
    /// what waits, or the next.
    func catchUp() {
        condition.lock()
        defer { condition.unlock() }
        let target = state.pointee.queued
        if state.pointee.recorded >= target || state.pointee.loopEnded || isLoopThread { return }
        state.pointee.readersWaiting += 1
        condition.broadcast()
        while state.pointee.recorded < target, !state.pointee.loopEnded { condition.wait() }
        state.pointee.readersWaiting -= 1
    }

    /// How many requests wait for the next round.
    var waitingCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return state.pointee.waiting.requests.count
    }

    /// Whether no request waits to be recorded (none queued, none in the round under way).
    var isEmpty: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state.pointee.recorded >= state.pointee.queued
    }

    /// Refuses later requests; the loop records what waits, then returns.
    func close() {
        condition.lock()
        defer { condition.unlock() }
        state.pointee.isClosed = true
        condition.broadcast()
    }

    /// Closes intake and returns once the loop has recorded every request queued (at once if it never
    /// started, or from its own thread).
    func closeAndCatchUp() {
        close()
        catchUp()
    }

    #if os(Linux)
    /// The CPU time the loop's thread has used, `nil` before it started: for a benchmark that counts what
    /// recording costs on both sides of the intake. Only while intake is open (the thread then runs).
    func loopCPUTime() -> Duration? {
        condition.lock()
        let thread = state.pointee.loopThread
        condition.unlock()
        var clock = clockid_t()
        guard let thread, pthread_getcpuclockid(thread, &clock) == 0 else { return nil }
        var time = timespec()
        clock_gettime(clock, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
    #endif

    /// Whether the caller runs on the loop's thread.
    var isOnLoopThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return isLoopThread
    }

    private var isLoopThread: Bool {
        guard let loopThread = state.pointee.loopThread else { return false }
        return pthread_equal(loopThread, pthread_self()) != 0
    }
}
