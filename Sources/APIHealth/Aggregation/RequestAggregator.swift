import LineProtocol

/// Every endpoint's interval aggregate, and the interval points they become (see ``AggregationOptions``).
///
/// A rendered request series (``RequestSeries``) holds its endpoint's aggregate, so recording a request
/// adds to it without a lookup; the registry is only consulted when a series is rendered.
final class RequestAggregator: Sendable {
    let options: AggregationOptions
    let histogram: DurationBuckets
    private let policy: RawPointPolicy
    private let objectives: ObjectiveOptions
    /// Guards the aggregates by their tags, in the order they were made.
    private let registry = Locked(
        (byTags: [[Point.Tag]: EndpointInterval](), ordered: [EndpointInterval](), isClosed: false)
    )
    /// Guards how many interval points were taken.
    private let taken = Locked<UInt64>(0)

    init(options: AggregationOptions, rawPoints: RawPoints, objectives: ObjectiveOptions = ObjectiveOptions()) {
        self.options = options
        self.objectives = objectives
        self.histogram = DurationBuckets(options.durationBoundaries)
        self.policy = RawPointPolicy(rawPoints)
    }

    /// The aggregate of the endpoint `tags` (sorted by key) name, made on first use.
    func interval(for tags: [Point.Tag]) -> EndpointInterval {
        registry.withLock { registry in
            if let existing = registry.byTags[tags] { return existing }
            let made = EndpointInterval(
                tags: tags,
                histogram: histogram,
                policy: policy,
                objective: objectives.isEmpty ? .none : EndpointObjective(objectives, tags: tags),
                seed: Self.seed(tags)
            )
            if registry.isClosed { _ = made.take(closing: true) }
            registry.byTags[tags] = made
            registry.ordered.append(made)
            return made
        }
    }

    /// A seed for the endpoint's sample that is the same in every run (FNV-1a over its tags).
    private static func seed(_ tags: [Point.Tag]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for tag in tags {
            for byte in tag.key.utf8 + [0] + tag.value.utf8 + [0] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return mix64(hash)
    }

    /// How many endpoint aggregates exist.
    var count: Int { registry.withLock { $0.ordered.count } }

    /// Interval points taken since the start.
    var pointsTaken: UInt64 { taken.withLock { $0 } }

    /// Requests counted and not written as a point of their own, since the start.
    var requestsOnlyAggregated: UInt64 {
        registry.withLock { $0.ordered }.reduce(0) { $0 &+ $1.onlyAggregated }
    }

    /// One point per endpoint that saw requests since the last call, stamped `timestamp`; the next
    /// interval starts empty. With `closing`, these are the last: the aggregates count nothing more, and
    /// aggregates made later start closed.
    func takePoints(at timestamp: Timestamp, closing: Bool = false) -> [Point] {
        let intervals = registry.withLock { registry in
            if closing { registry.isClosed = true }
            return registry.ordered
        }
        var points: [Point] = []
        for interval in intervals {
            guard let counts = interval.take(closing: closing) else { continue }
            points.append(point(counts, tags: interval.tags, objective: interval.objective, at: timestamp))
        }
        taken.withLock { $0 += UInt64(points.count) }
        return points
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
            Point.Field(F.durationMinimum, .float(Double(counts.minimum) / 1e6)),
            Point.Field(F.durationMaximum, .float(Double(counts.maximum) / 1e6)),
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
        return Point(measurement: options.measurement, tags: tags, fields: fields, timestamp: timestamp)
    }
}
