import LineProtocol

/// Every endpoint's interval aggregate, and the interval points they become (see ``AggregationOptions``).
///
/// A rendered request series (``RequestSeries``) holds its endpoint's aggregate, so recording a request
/// adds to it without a lookup; the registry is only consulted when a series is rendered.
///
/// Bounded: at most ``AggregationOptions/maximumEndpoints`` aggregates; the requests of any further
/// endpoint are counted in one overflow aggregate (every endpoint tag the overflow value), so totals
/// stay exact. An aggregate without a request for ``AggregationOptions/idleEviction`` is evicted.
final class RequestAggregator: Sendable {
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
        /// The `onlyAggregated` counts of the aggregates evicted and not taken back.
        var onlyAggregatedByEvicted: UInt64 = 0
        /// Interval points taken since the start.
        var pointsTaken: UInt64 = 0
    }

    /// Guards the aggregates by their tags. The lock order: the registry before the aggregates' lock
    /// (``RenderedSeries``), which is never held while the registry's is taken.
    private let registry = Locked(Registry())
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
        registry.withLock { registry in
            if let existing = registry.byTags[tags] { return (existing, false) }
            guard registry.byTags.count < max(options.maximumEndpoints, 1) else {
                return (overflow(&registry), true)
            }
            let made = make(tags, isClosed: registry.isClosed)
            registry.byTags[tags] = made
            registry.ordered.append(made)
            return (made, false)
        }
    }

    private func make(_ tags: [Point.Tag], isClosed: Bool) -> EndpointInterval {
        let made = EndpointInterval(
            tags: tags,
            histogram: histogram,
            policy: policy,
            objective: objectives.isEmpty ? .none : EndpointObjective(objectives, tags: tags),
            seed: Self.seed(tags),
            guardedBy: renderedSeries.lock,
            aggregator: self
        )
        if isClosed { _ = made.take(closing: true) }
        return made
    }

    private func overflow(_ registry: inout Registry) -> EndpointInterval {
        if let overflow = registry.overflow { return overflow }
        let made = make(overflowTags, isClosed: registry.isClosed)
        registry.overflow = made
        return made
    }

    /// Where the requests of `evicted` go now: itself, taken back under the cap; the aggregate made for
    /// its tags since; or the overflow aggregate. `nil` once the aggregates are closed.
    func readmit(_ evicted: EndpointInterval) -> EndpointInterval? {
        registry.withLock { registry -> EndpointInterval? in
            if registry.isClosed { return nil }
            let target: EndpointInterval
            if let existing = registry.byTags[evicted.tags] {
                target = existing
            } else if registry.byTags.count < max(options.maximumEndpoints, 1) {
                registry.byTags[evicted.tags] = evicted
                registry.ordered.append(evicted)
                registry.onlyAggregatedByEvicted &-= evicted.onlyAggregated
                target = evicted
            } else {
                target = overflow(&registry)
            }
            evicted.readmitted(to: target)
            return target
        }
    }

    /// Aggregates evicted since the start.
    var evicted: UInt64 { registry.withLock { $0.evicted } }

    /// Requests counted in the overflow aggregate since the start.
    var requestsOverflowed: UInt64 { registry.withLock { $0.overflow }?.total ?? 0 }

    /// A seed for the endpoint's sample that is the same in every run (FNV-1a over its tags).
    private static func seed(_ tags: [Point.Tag]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for tag in tags {
            for byte in tag.key.utf8 + [0] + tag.value.utf8 + [0] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return mix64(hash)
    }

    /// How many endpoint aggregates exist (the overflow aggregate is not one).
    var count: Int { registry.withLock { $0.byTags.count } }

    /// Interval points taken since the start.
    var pointsTaken: UInt64 { registry.withLock { $0.pointsTaken } }

    /// Requests counted and not written as a point of their own, since the start.
    var requestsOnlyAggregated: UInt64 {
        registry.withLock { registry in
            (registry.ordered + (registry.overflow.map { [$0] } ?? [])).reduce(registry.onlyAggregatedByEvicted) {
                $0 &+ $1.onlyAggregated
            }
        }
    }

    /// One point per endpoint that saw requests since the last call, stamped `timestamp`; the next
    /// interval starts empty. With `closing`, these are the last: the aggregates count nothing more, and
    /// aggregates made later start closed.
    func takePoints(at timestamp: Timestamp, closing: Bool = false) -> [Point] {
        let intervals = registry.withLock { registry in
            if closing { registry.isClosed = true }
            return registry.ordered + (registry.overflow.map { [$0] } ?? [])
        }
        var points: [Point] = []
        var idle = false
        for interval in intervals {
            guard let counts = interval.take(closing: closing) else {
                idle = true
                continue
            }
            points.append(point(counts, tags: interval.tags, objective: interval.objective, at: timestamp))
        }
        registry.withLock { $0.pointsTaken += UInt64(points.count) }
        if idle && !closing { evictIdle() }
        return points
    }

    /// Evicts the aggregates idle for ``AggregationOptions/idleEviction``.
    private func evictIdle() {
        let evicted = registry.withLock { registry -> [EndpointInterval] in
            var evicted: [EndpointInterval] = []
            registry.ordered.removeAll { interval in
                guard interval.evictIfIdle(for: idleIntervals) else { return false }
                registry.byTags[interval.tags] = nil
                registry.onlyAggregatedByEvicted &+= interval.onlyAggregated
                evicted.append(interval)
                return true
            }
            registry.evicted += UInt64(evicted.count)
            return evicted
        }
        if !evicted.isEmpty { renderedSeries.invalidate() }
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
