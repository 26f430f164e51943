import LineProtocol

/// The bucket bounds of the duration histogram, in nanoseconds, ascending, and the field key each bucket
/// is written under (`le_<milliseconds>`, then `le_inf`).
struct DurationBuckets: Sendable {
    let bounds: [Int64]
    let fieldNames: [String]

    init(_ boundaries: [Duration]) {
        bounds = Array(Set(boundaries.compactMap { RequestSchema.wholeNanoseconds($0) }.filter { $0 > 0 })).sorted()
        fieldNames =
            bounds.map { PointSchema.IntervalField.bucket(milliseconds: Double($0) / 1e6) } + [
                PointSchema.IntervalField.bucketInfinity
            ]
    }

    /// The bucket of a request that took `nanoseconds`: the first whose bound is at or above it, else the
    /// last (above every bound).
    @inline(__always)
    func index(of nanoseconds: Int64) -> Int { bucketIndex(of: nanoseconds, in: bounds) }
}

/// The histogram bucket of `value` among ascending upper `bounds`: the first bound at or above it, else
/// `bounds.count` (the bucket above every bound). A binary search: no allocation. Public under the `Package`
/// SPI so that it is inlined and specialized in the package's other targets (see ``Locked``).
@_spi(Package) @inlinable
public func bucketIndex<Value: Comparable>(of value: Value, in bounds: [Value]) -> Int {
    var low = 0
    var high = bounds.count
    while low < high {
        let middle = (low + high) >> 1
        if bounds[middle] < value { low = middle + 1 } else { high = middle }
    }
    return low
}

/// What one endpoint (one series of interval points) gathered since its last point.
struct IntervalCounts: Sendable {
    var count: UInt64 = 0
    var errors: UInt64 = 0
    /// Nanoseconds, saturating.
    var durationSum: Int64 = 0
    var minimum = Int64.max
    var maximum = Int64.min
    var requestBytes: UInt64 = 0
    var responseBytes: UInt64 = 0
    /// Requests at or below the endpoint's latency objective's threshold.
    var withinLatencyObjective: UInt64 = 0
    /// Transport errors by ``TransportErrorKind`` (its raw value is the index).
    var transportErrors: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

    /// Whether anything was counted: a request, or a failure on the device or a cancellation (which ``count``
    /// leaves out).
    var isEmpty: Bool { count == 0 && transportErrors.4 == 0 && transportErrors.5 == 0 }
    /// Requests per bucket (not cumulative), one more than there are bounds.
    var buckets: [UInt64]
    /// What the cache advisor made of the interval's responses; `nil` until it judged one (and always
    /// without cache advice).
    var cache: CacheCounts?

    init(bucketCount: Int) {
        buckets = Array(repeating: 0, count: bucketCount)
    }

    /// The upper bound of the bucket holding the nearest-rank quantile `q`, in nanoseconds (`nil` in the
    /// bucket above every bound).
    func bound(ofQuantile q: Double, in histogram: DurationBuckets) -> Int64? {
        let rank = max(1, UInt64((q * Double(count)).rounded(.up)))
        var seen: UInt64 = 0
        for (index, inBucket) in buckets.enumerated() {
            seen += inBucket
            if seen >= rank { return index < histogram.bounds.count ? histogram.bounds[index] : nil }
        }
        return nil
    }
}

/// Which requests also become a point of their own, as the record path checks it.
struct RawPointPolicy: Sendable {
    let mode: RawPoints.Mode
    let slowerThan: Int64
    /// A uniform 64-bit draw below this is sampled.
    let sampleBelow: UInt64
    /// With `errorsAndSlow`: raw points an endpoint may write in one interval
    /// (``RawPoints/maximumPerSecond`` × the interval, at least one).
    let budget: UInt64

    init(_ rawPoints: RawPoints, interval: Duration = .seconds(10)) {
        mode = rawPoints.mode
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        let perInterval = (rawPoints.maximumPerSecond * seconds).rounded(.down)
        budget =
            rawPoints.mode != .errorsAndSlow || !(perInterval < 1.8e19) ? .max : max(1, UInt64(max(perInterval, 0)))
        slowerThan = RequestSchema.wholeNanoseconds(rawPoints.slowerThan) ?? .max
        let rate = min(max(rawPoints.sampleRate, 0), 1)
        sampleBelow = rate >= 1 ? .max : UInt64(rate * 18_446_744_073_709_551_616.0)
    }
}

/// One endpoint's interval aggregate: host, templated path, method, module, status class and the global
/// tags. A request's series holds it, so a request is counted in it with no lookup and no allocation;
/// the aggregator takes its counts at the end of each interval.
///
/// An aggregate idle for long enough is evicted by its aggregator; a request that still reaches it (through a
/// series rendered before) readmits it, or goes to the aggregate that took its place (see
/// ``RequestAggregator/readmit(_:)``), so no request is lost to an eviction.
///
/// `@unchecked Sendable` because only the record loop touches it (it counts requests and takes the
/// interval's counts), or the thread that closes intake once the loop has ended: it takes no lock.
final class EndpointInterval: @unchecked Sendable {
    /// The interval point's tags, sorted by key.
    let tags: [Point.Tag]
    private let histogram: DurationBuckets
    private let policy: RawPointPolicy
    /// The endpoint's objective, found when the aggregate was made.
    let objective: EndpointObjective
    /// Where an evicted aggregate is readmitted (`nil` once the agent is gone).
    private weak let aggregator: RequestAggregator?

    private struct State {
        var counts: IntervalCounts
        /// The upper bound of the bucket that held the p99 of the last interval of at least
        /// ``EndpointInterval/quantileMinimum`` requests: a request above it is slow for this endpoint.
        var slowAbove = Int64.max
        /// xorshift64 state of the uniform sample.
        var random: UInt64
        /// Set once the last interval point is taken (shutdown): later requests are not counted here.
        var isClosed = false
        /// Requests counted here since the start.
        var total: UInt64 = 0
        /// Raw points this endpoint may still write in this interval (``RawPointPolicy/budget``).
        var rawLeft: UInt64
        /// Intervals in a row without a request.
        var idleIntervals = 0
        /// Set when the aggregator evicted it; a request then readmits it (or goes to `forward`).
        var isEvicted = false
        /// Where requests go once another aggregate took this one's place.
        var forward: EndpointInterval?
    }

    /// What became of a request added (see ``add(duration:failure:requestBytes:responseBytes:)``).
    enum Added {
        /// Counted; write it as a point of its own too.
        case counted
        /// Counted, and not written on its own.
        case countedOnly
        /// Not counted: the aggregates are closed (the agent is shutting down).
        case closed
        /// Not counted: the aggregator evicted it (``add(duration:failure:requestBytes:responseBytes:)``
        /// takes the request to the aggregate in its place).
        case evicted
    }
    /// Only the record loop's (see the type's documentation).
    @exclusivity(unchecked) private var state: State

    /// Requests an interval needs before its p99 is trusted as the endpoint's.
    static let quantileMinimum: UInt64 = 100

    init(
        tags: [Point.Tag],
        histogram: DurationBuckets,
        policy: RawPointPolicy,
        objective: EndpointObjective,
        seed: UInt64,
        aggregator: RequestAggregator? = nil
    ) {
        self.tags = tags
        self.histogram = histogram
        self.policy = policy
        self.objective = objective
        self.aggregator = aggregator
        self.state = State(
            counts: IntervalCounts(bucketCount: histogram.bounds.count + 1),
            random: seed == 0 ? 1 : seed,
            rawLeft: policy.budget
        )
    }

    /// Adds one request, and says whether it is also written as a point of its own.
    func add(
        duration: Duration,
        failure: RequestFailure,
        requestBytes: UInt64,
        responseBytes: UInt64
    ) -> Added {
        let nanoseconds = RequestSchema.wholeNanoseconds(duration) ?? .max
        let added = add(
            nanoseconds: nanoseconds,
            failure: failure,
            requestBytes: requestBytes,
            responseBytes: responseBytes
        )
        guard added == .evicted else { return added }
        return moved(
            duration: duration,
            failure: failure,
            requestBytes: requestBytes,
            responseBytes: responseBytes
        )
    }

    /// ``add(duration:failure:requestBytes:responseBytes:)`` as the record path calls it, as it finds the
    /// request's series; `.evicted` is the caller's to take to
    /// ``add(duration:failure:requestBytes:responseBytes:)``, which finds the aggregate in its place.
    @inline(__always)
    func add(
        nanoseconds: Int64,
        failure: RequestFailure,
        requestBytes: UInt64,
        responseBytes: UInt64
    ) -> Added {
        if state.isClosed { return .closed }
        if state.isEvicted { return .evicted }
        if case .transport(let kind) = failure, !kind.isTheAPIs {
            // The device's own failure or a cancellation: counted apart, in no other field.
            state.total &+= 1
            if kind == .device { state.counts.transportErrors.4 &+= 1 } else { state.counts.transportErrors.5 &+= 1 }
            if policy.mode == .all || (policy.mode == .errorsAndSlow && state.rawLeft > 0) {
                if policy.mode == .errorsAndSlow { state.rawLeft -= 1 }
                return .counted
            }
            return .countedOnly
        }
        let bucket = histogram.index(of: nanoseconds)
        state.total &+= 1
        state.counts.count &+= 1
        if failure.isFailure {
            state.counts.errors &+= 1
            if case .transport(let kind) = failure {
                switch kind {
                case .dns: state.counts.transportErrors.0 &+= 1
                case .connect: state.counts.transportErrors.1 &+= 1
                case .tls: state.counts.transportErrors.2 &+= 1
                case .timeout: state.counts.transportErrors.3 &+= 1
                case .device: state.counts.transportErrors.4 &+= 1
                case .cancelled: state.counts.transportErrors.5 &+= 1
                }
            }
        }
        let (sum, overflow) = state.counts.durationSum.addingReportingOverflow(nanoseconds)
        state.counts.durationSum = overflow ? (nanoseconds < 0 ? .min : .max) : sum
        if nanoseconds < state.counts.minimum { state.counts.minimum = nanoseconds }
        if nanoseconds > state.counts.maximum { state.counts.maximum = nanoseconds }
        state.counts.requestBytes &+= requestBytes
        state.counts.responseBytes &+= responseBytes
        state.counts.buckets[bucket] &+= 1
        if nanoseconds <= objective.latencyThreshold { state.counts.withinLatencyObjective &+= 1 }
        switch policy.mode {
        case .all: return .counted
        case .none:
            return .countedOnly
        case .errorsAndSlow:
            if failure.isFailure || nanoseconds >= policy.slowerThan || nanoseconds > state.slowAbove {
                // Failed and slow requests, within the endpoint's budget for the interval.
                if state.rawLeft > 0 {
                    state.rawLeft -= 1
                    return .counted
                }
            } else {
                state.random ^= state.random << 13
                state.random ^= state.random >> 7
                state.random ^= state.random << 17
                if state.random < policy.sampleBelow { return .counted }
            }
            return .countedOnly
        }
    }

    /// Counts the cache advisor's verdict on a response that took `nanoseconds`, of a request just added
    /// (the record loop, with cache advice). A response whose request reached a closed or evicted
    /// aggregate is not counted here: its request went to the aggregate in its place, or to none.
    func count(_ judged: JudgedResponse, nanoseconds: Int64) {
        if state.isClosed || state.isEvicted { return }
        if state.counts.cache == nil { state.counts.cache = CacheCounts() }
        state.counts.cache?.add(
            judged.verdict,
            policy: judged.policy,
            servedLocally: judged.servedLocally,
            nanoseconds: nanoseconds
        )
    }

    /// Adds a request that reached this aggregate after it was evicted: to the aggregate now in its place.
    @inline(never)
    private func moved(
        duration: Duration,
        failure: RequestFailure,
        requestBytes: UInt64,
        responseBytes: UInt64
    ) -> Added {
        // Readmitted itself (added here, once), or sent to the aggregate in its place; none once closed.
        guard let target = state.forward ?? aggregator?.readmit(self) else { return .closed }
        return target.add(
            duration: duration,
            failure: failure,
            requestBytes: requestBytes,
            responseBytes: responseBytes
        )
    }

    /// Requests counted here since the start.
    var total: UInt64 { state.total }

    /// Evicts it if it was idle for `intervals` whole intervals and nothing came since.
    func evictIfIdle(for intervals: Int) -> Bool {
        guard !state.isEvicted, state.idleIntervals >= intervals, state.counts.isEmpty else { return false }
        state.isEvicted = true
        return true
    }

    /// Takes an evicted aggregate back (`to` itself), or sends its requests `to` another.
    func readmitted(to target: EndpointInterval) {
        if target === self {
            state.isEvicted = false
            state.idleIntervals = 0
        } else {
            state.forward = target
        }
    }

    /// This interval's counts (`nil` if no request came), starting the next interval empty; with
    /// `closing`, the last: later requests are refused (``Added/closed``).
    func take(closing: Bool = false) -> IntervalCounts? {
        if closing { state.isClosed = true }
        state.rawLeft = policy.budget
        guard !state.counts.isEmpty else {
            state.idleIntervals += 1
            return nil
        }
        state.idleIntervals = 0
        let taken = state.counts
        if taken.count >= Self.quantileMinimum {
            state.slowAbove = taken.bound(ofQuantile: 0.99, in: histogram) ?? .max
        }
        state.counts.count = 0
        state.counts.errors = 0
        state.counts.durationSum = 0
        state.counts.minimum = .max
        state.counts.maximum = .min
        state.counts.requestBytes = 0
        state.counts.responseBytes = 0
        state.counts.withinLatencyObjective = 0
        state.counts.transportErrors = (0, 0, 0, 0, 0, 0)
        for index in state.counts.buckets.indices { state.counts.buckets[index] = 0 }
        if state.counts.cache != nil { state.counts.cache = nil }
        return taken
    }
}
