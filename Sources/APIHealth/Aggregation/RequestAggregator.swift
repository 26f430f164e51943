import LineProtocol

/// Every endpoint's interval aggregate, and the interval points they become (see ``AggregationOptions``).
///
/// A rendered request series (``RequestSeries``) holds its endpoint's aggregate, so recording a request
/// adds to it without a lookup; the registry is only consulted when a series is rendered.
///
/// Bounded: at most ``AggregationOptions/maximumEndpoints`` aggregates; the requests of any further
/// endpoint are counted in one overflow aggregate (every endpoint tag the overflow value), so totals
/// stay exact. An aggregate without a request for ``AggregationOptions/idleEviction`` is evicted.
///
/// The record loop's alone: it counts requests and takes the interval points (the thread that closes
/// intake takes the last ones, once the loop has ended). Readers see what it counted through
/// ``counts``, which the loop publishes with the batches' counters after every round.
///
/// `@unchecked Sendable` because only that one thread at a time touches `registry`: it takes no lock.
final class RequestAggregator: @unchecked Sendable {
    let options: AggregationOptions
    let histogram: DurationBuckets
    private let policy: RawPointPolicy
    private let objectives: ObjectiveOptions
    /// Whole intervals without a request after which an aggregate is evicted.
    private let idleIntervals: Int
    /// Invalidated when an aggregate is evicted (its series point at the aggregate).
    private let renderedSeries: RenderedSeries

    private struct Registry {
        var byTags: [[Point.Tag]: EndpointInterval] = [:]
        /// In the order they were made.
        var ordered: [EndpointInterval] = []
        var isClosed = false
        /// Made on the first endpoint past the cap.
        var overflow: EndpointInterval?
        var evicted: UInt64 = 0
        /// Requests counted and not written as a point of their own, since the start.
        var onlyAggregated: UInt64 = 0
        /// Interval points taken since the start.
        var pointsTaken: UInt64 = 0
    }

    /// The aggregates by their tags, and what they counted.
    @exclusivity(unchecked) private var registry = Registry()
    /// The overflow aggregate's tags, sorted by key.
    private let overflowTags: [Point.Tag]

    init(
        options: AggregationOptions,
        rawPoints: RawPoints,
        objectives: ObjectiveOptions = ObjectiveOptions(),
        overflowTags: [Point.Tag] = [],
        renderedSeries: RenderedSeries = RenderedSeries()
    ) {
        self.options = options
        self.objectives = objectives
        self.histogram = DurationBuckets(options.durationBoundaries)
        self.policy = RawPointPolicy(rawPoints, interval: options.interval)
        self.overflowTags = overflowTags
        self.renderedSeries = renderedSeries
        let interval = max(Double(RequestSchema.wholeNanoseconds(options.interval) ?? .max), 1)
        let idle = (Double(RequestSchema.wholeNanoseconds(options.idleEviction) ?? .max) / interval).rounded(.up)
        self.idleIntervals = idle < Double(Int.max) ? max(Int(idle), 1) : .max
    }

    /// The aggregate of the endpoint `tags` (sorted by key) name, made on first use; past the cap, the
    /// overflow aggregate (`overflowed`).
    func interval(for tags: [Point.Tag]) -> (interval: EndpointInterval, overflowed: Bool) {
        if let existing = registry.byTags[tags] { return (existing, false) }
        guard registry.byTags.count < max(options.maximumEndpoints, 1) else { return (overflow(), true) }
        let made = make(tags, isClosed: registry.isClosed)
        registry.byTags[tags] = made
        registry.ordered.append(made)
        return (made, false)
    }

    private func make(_ tags: [Point.Tag], isClosed: Bool) -> EndpointInterval {
        let made = EndpointInterval(
            tags: tags,
            histogram: histogram,
            policy: policy,
            objective: objectives.isEmpty ? .none : EndpointObjective(objectives, tags: tags),
            seed: Self.seed(tags),
            aggregator: self
        )
        if isClosed { _ = made.take(closing: true) }
        return made
    }

    private func overflow() -> EndpointInterval {
        if let overflow = registry.overflow { return overflow }
        let made = make(overflowTags, isClosed: registry.isClosed)
        registry.overflow = made
        return made
    }

    /// Where the requests of `evicted` go now: itself, taken back under the cap; the aggregate made for
    /// its tags since; or the overflow aggregate. `nil` once the aggregates are closed.
    func readmit(_ evicted: EndpointInterval) -> EndpointInterval? {
        if registry.isClosed { return nil }
        let target: EndpointInterval
        if let existing = registry.byTags[evicted.tags] {
            target = existing
        } else if registry.byTags.count < max(options.maximumEndpoints, 1) {
            registry.byTags[evicted.tags] = evicted
            registry.ordered.append(evicted)
            target = evicted
        } else {
            target = overflow()
        }
        evicted.readmitted(to: target)
        return target
    }

    /// Counts a request its aggregate counted and that is not written as a point of its own.
    @inline(__always)
    func countOnlyAggregated() {
        registry.onlyAggregated &+= 1
    }

    /// What the aggregates counted since the start, as readers see it (``AgentMetrics``).
    struct Counts: Equatable {
        /// Endpoint aggregates held (the overflow aggregate is not one).
        var endpoints = 0
        /// Requests counted in the overflow aggregate.
        var requestsOverflowed: UInt64 = 0
        /// Aggregates evicted.
        var evicted: UInt64 = 0
        /// Requests counted and not written as a point of their own.
        var requestsOnlyAggregated: UInt64 = 0
        /// Interval points taken.
        var pointsTaken: UInt64 = 0
    }

    var counts: Counts {
        Counts(
            endpoints: registry.byTags.count,
            requestsOverflowed: registry.overflow?.total ?? 0,
            evicted: registry.evicted,
            requestsOnlyAggregated: registry.onlyAggregated,
            pointsTaken: registry.pointsTaken
        )
    }

    /// A seed for the endpoint's sample that is the same in every run (FNV-1a over its tags).
    private static func seed(_ tags: [Point.Tag]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for tag in tags {
            for byte in tag.key.utf8 + [0] + tag.value.utf8 + [0] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return mix64(hash)
    }

    /// One point per endpoint that saw requests since the last call, stamped `timestamp`; the next
    /// interval starts empty. With `closing`, these are the last: the aggregates count nothing more, and
    /// aggregates made later start closed.
    func takePoints(at timestamp: Timestamp, closing: Bool = false) -> [Point] {
        if closing { registry.isClosed = true }
        var points: [Point] = []
        var idle = false
        for interval in registry.ordered + (registry.overflow.map { [$0] } ?? []) {
            guard let counts = interval.take(closing: closing) else {
                idle = true
                continue
            }
            points.append(point(counts, tags: interval.tags, objective: interval.objective, at: timestamp))
        }
        registry.pointsTaken += UInt64(points.count)
        if idle && !closing { evictIdle() }
        return points
    }

    /// Evicts the aggregates idle for ``AggregationOptions/idleEviction``.
    private func evictIdle() {
        var evicted = 0
        registry.ordered.removeAll { interval in
            guard interval.evictIfIdle(for: idleIntervals) else { return false }
            registry.byTags[interval.tags] = nil
            evicted += 1
            return true
        }
        registry.evicted += UInt64(evicted)
        if evicted > 0 { renderedSeries.invalidate() }
    }

    private func point(
        _ counts: IntervalCounts,
        tags: [Point.Tag],
        objective: EndpointObjective,
        at timestamp: Timestamp
    ) -> Point {
        typealias F = PointSchema.IntervalField
        var fields: [Point.Field] = [
            Point.Field(F.count, .int(Int64(clamping: counts.count))),
            Point.Field(F.errors, .int(Int64(clamping: counts.errors))),
            Point.Field(F.durationSum, .float(Double(counts.durationSum) / 1e6)),
            Point.Field(F.durationMinimum, .float(counts.count == 0 ? 0 : Double(counts.minimum) / 1e6)),
            Point.Field(F.durationMaximum, .float(counts.count == 0 ? 0 : Double(counts.maximum) / 1e6)),
            Point.Field(F.requestBytes, .int(Int64(clamping: counts.requestBytes))),
            Point.Field(F.responseBytes, .int(Int64(clamping: counts.responseBytes))),
        ]
        fields.reserveCapacity(fields.count + counts.buckets.count)
        // Cumulative over the bounds, as `le` buckets are: each holds the requests at or below its bound.
        var cumulative: UInt64 = 0
        for (index, inBucket) in counts.buckets.enumerated() {
            cumulative += inBucket
            fields.append(Point.Field(histogram.fieldNames[index], .int(Int64(clamping: cumulative))))
        }
        let transportErrors = counts.transportErrors
        for (kind, count) in zip(
            TransportErrorKind.allCases,
            [
                transportErrors.0, transportErrors.1, transportErrors.2, transportErrors.3, transportErrors.4,
                transportErrors.5,
            ]
        ) where count > 0 {
            fields.append(Point.Field(kind.fieldName, .int(Int64(clamping: count))))
        }
        if let availability = objective.availability {
            fields.append(Point.Field(F.objectiveAvailability, .float(availability)))
        }
        if let target = objective.latencyTarget {
            fields.append(Point.Field(F.objectiveLatency, .float(target)))
            fields.append(Point.Field(F.objectiveLatencyMilliseconds, .float(Double(objective.latencyThreshold) / 1e6)))
            fields.append(
                Point.Field(F.requestsWithinLatencyObjective, .int(Int64(clamping: counts.withinLatencyObjective)))
            )
        }
        if let cache = counts.cache { fields += cache.fields() }
        return Point(measurement: options.measurement, tags: tags, fields: fields, timestamp: timestamp)
    }
}
