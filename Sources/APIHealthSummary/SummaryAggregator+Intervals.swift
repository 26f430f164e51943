import APIHealth
import Foundation
import LineProtocol

/// What an endpoint's interval points added up to: its requests, errors, the cumulative histogram, and
/// what they say about its objectives.
struct IntervalTotals: Sendable {
    var requests = 0
    var errors = 0
    /// Requests at or below each bucket bound (milliseconds; `infinity` for `le_inf`), summed over points.
    var cumulative: [Double: Int] = [:]
    /// The slowest request any point saw (`duration_ms_max`), for a quantile above every bound.
    var maximum: Double?
    /// The availability and latency objectives over every point that carried them.
    var availability = ObjectiveTally()
    var latency = ObjectiveTally()
    /// The same, per point timestamp (nanoseconds), for the points that may still be in the burn-rate window.
    var recent: [Int64: (availability: ObjectiveTally, latency: ObjectiveTally)] = [:]

    /// Adds `point`; `newest` is the newest interval point's timestamp read so far (nanoseconds), `window`
    /// how far back from it the current burn rate looks.
    mutating func add(_ point: Point, newest: Int64?, window: Int64) {
        typealias F = PointSchema.IntervalField
        var count = 0
        var failed = 0
        var availabilityObjective: Double?
        var latencyObjective: Double?
        var latencyThreshold: Double?
        var withinLatency: Int?
        for field in point.fields {
            guard let value = field.value.number else { continue }
            if field.key == F.count {
                count = Self.whole(value)
            } else if field.key == F.errors {
                failed = Self.whole(value)
            } else if field.key == F.durationMaximum {
                maximum = max(maximum ?? value, value)
            } else if field.key == F.bucketInfinity {
                cumulative[.infinity, default: 0] += Self.whole(value)
            } else if field.key.hasPrefix("le_"), let bound = Double(field.key.dropFirst(3)) {
                cumulative[bound, default: 0] += Self.whole(value)
            } else if field.key == F.objectiveAvailability, value > 0, value < 1 {
                availabilityObjective = value
            } else if field.key == F.objectiveLatency, value > 0, value < 1 {
                latencyObjective = value
            } else if field.key == F.objectiveLatencyMilliseconds {
                latencyThreshold = value
            } else if field.key == F.requestsWithinLatencyObjective {
                withinLatency = Self.whole(value)
            }
        }
        requests += count
        errors += failed
        guard availabilityObjective != nil || latencyObjective != nil else { return }
        let timestamp = point.timestamp?.value(in: .ns)
        var pointAvailability = ObjectiveTally()
        var pointLatency = ObjectiveTally()
        if let availabilityObjective {
            pointAvailability.add(requests: count, bad: failed, objective: availabilityObjective, at: timestamp)
        }
        if let latencyObjective {
            // Without the count of requests within the threshold, none is counted slow.
            let bad = count - min(count, withinLatency ?? count)
            pointLatency.add(
                requests: count,
                bad: bad,
                objective: latencyObjective,
                thresholdMilliseconds: latencyThreshold,
                at: timestamp
            )
        }
        availability.merge(pointAvailability)
        latency.merge(pointLatency)
        guard let timestamp, let newest, timestamp > newest - window else { return }
        recent[timestamp, default: (ObjectiveTally(), ObjectiveTally())].availability.merge(pointAvailability)
        recent[timestamp, default: (ObjectiveTally(), ObjectiveTally())].latency.merge(pointLatency)
        // A point older than the window is never in it again (the newest only moves on): let such points go
        // once there are more than a window of 10 s intervals holds.
        if recent.count > 64 { recent = recent.filter { $0.key > newest - window } }
    }

    /// The objectives' summaries: over every point, and over the points stamped after `windowStart`.
    func objectives(after windowStart: Int64?) -> (availability: ObjectiveSummary?, latency: ObjectiveSummary?) {
        var inWindow = (availability: ObjectiveTally(), latency: ObjectiveTally())
        if let windowStart {
            for (timestamp, slot) in recent where timestamp > windowStart {
                inWindow.availability.merge(slot.availability)
                inWindow.latency.merge(slot.latency)
            }
        }
        return (availability.summary(window: inWindow.availability), latency.summary(window: inWindow.latency))
    }

    private static func whole(_ value: Double) -> Int { Int(clamping: Int64(max(min(value, 1e18), 0))) }

    /// The upper bound (milliseconds) of the bucket holding the nearest-rank quantile `q`; above every
    /// bound, the slowest request seen.
    func bound(ofQuantile q: Double) -> Double? {
        guard requests > 0 else { return nil }
        let rank = max(1, Int((q * Double(requests)).rounded(.up)))
        for (bound, count) in cumulative.sorted(by: { $0.key < $1.key }) where count >= rank {
            return bound.isFinite ? bound : maximum
        }
        return maximum
    }
}

/// One objective's requests over some interval points: the requests, the bad ones, and the bad ones the
/// objective allows (`(1 - objective) × requests`, summed point by point, so a changed objective counts
/// with the value each point carried).
struct ObjectiveTally: Sendable {
    var requests = 0
    var bad = 0
    var allowed = 0.0
    /// The objective and latency threshold (milliseconds) of the newest point added, and its timestamp.
    var objective: Double?
    var thresholdMilliseconds: Double?
    var newest: Int64?

    /// Adds one point's requests, `bad` of them, under `objective`.
    mutating func add(
        requests: Int,
        bad: Int,
        objective: Double,
        thresholdMilliseconds: Double? = nil,
        at timestamp: Int64?
    ) {
        var point = ObjectiveTally()
        point.requests = requests
        point.bad = min(bad, requests)
        point.allowed = (1 - objective) * Double(requests)
        point.objective = objective
        point.thresholdMilliseconds = thresholdMilliseconds
        point.newest = timestamp
        merge(point)
    }

    /// Adds `other`'s requests; its objective is kept when its newest point is as new or newer (a point
    /// without a timestamp counts as the newest).
    mutating func merge(_ other: ObjectiveTally) {
        requests += other.requests
        bad += other.bad
        allowed += other.allowed
        guard let objective = other.objective else { return }
        if self.objective == nil || (other.newest ?? Int64.max) >= (newest ?? Int64.min) {
            self.objective = objective
            thresholdMilliseconds = other.thresholdMilliseconds
            newest = other.newest
        }
    }

    /// The summary row's view, or `nil` when no point carried the objective.
    func summary(window: ObjectiveTally) -> ObjectiveSummary? {
        guard let objective else { return nil }
        return ObjectiveSummary(
            objective: objective,
            thresholdMilliseconds: thresholdMilliseconds,
            budgetUsed: allowed > 0 ? Double(bad) / allowed : nil,
            burnRate: window.allowed > 0 ? Double(window.bad) / window.allowed : nil
        )
    }
}

extension SummaryAggregator {
    /// Counts one interval line of the endpoint at `index`.
    mutating func addInterval(_ line: UnsafeBufferPointer<UInt8>, endpoint index: Int) {
        guard let point = try? LineParser(precision: precision).parseLine(line) else {
            counts.corrupt += 1
            return
        }
        if let since, let timestamp = point.timestamp?.value(in: .ns), timestamp < since {
            counts.earlier += 1
            return
        }
        counts.intervalLines += 1
        if readsIntervalLines { addIntervalPoint(point, endpoint: index) }
    }

    /// Counts an interval line a filter leaves out in the cache advice's time observed only.
    mutating func observeFilteredInterval(_ line: UnsafeBufferPointer<UInt8>) {
        guard readsIntervalLines, let point = try? LineParser(precision: precision).parseLine(line) else { return }
        if let since, let timestamp = point.timestamp?.value(in: .ns), timestamp < since { return }
        cacheAdvice.observe(point)
    }

    /// Counts an interval point the agent handed over itself (the demo's, so every request is counted
    /// whether or not its lines were delivered and removed from the spool before they were read).
    ///
    /// - Parameter point: A point of the interval measurement; others are ignored.
    package mutating func add(intervalPoint point: Point) {
        guard point.measurement == intervalMeasurement,
            let host = point.tag(PointSchema.Tag.host), let path = point.tag(PointSchema.Tag.path),
            let method = point.tag(PointSchema.Tag.method)
        else { return }
        for filter in tagFilters where point.tag(filter.key) != filter.value {
            cacheAdvice.observe(point)
            return
        }
        let key = EndpointKey(host: host, path: path, method: method, country: point.tag(PointSchema.Tag.country))
        let index = endpoint(key)
        addIntervalPoint(point, endpoint: index)
    }

    private mutating func addIntervalPoint(_ point: Point, endpoint index: Int) {
        if let timestamp = point.timestamp?.value(in: .ns) {
            newestInterval = max(newestInterval ?? timestamp, timestamp)
        }
        endpoints[index].intervals.add(point, newest: newestInterval, window: Self.burnWindow)
        cacheAdvice.add(point)
    }
}

extension FieldValue {
    /// An integer, unsigned or float field's value as a `Double`; `nil` for a string or a boolean.
    var number: Double? {
        switch self {
        case .int(let number): Double(number)
        case .uint(let number): Double(number)
        case .float(let number): number
        default: nil
        }
    }
}
