import APIHealth
import Foundation
import LineProtocol

/// Sums the cache advisor's fields (``PointSchema/cacheIntervalFields``) of interval points per endpoint
/// (host, path, method and module, across status classes and intervals) into rows ranked by the waiting a
/// cache would have saved: what `influx-tail --cache` and the "What to cache" section of `--summary`
/// print (``CacheAdviceTable``).
///
/// The advisor is opt-in (``APIHealthConfiguration/CaptureOptions/cacheAdvice``), so only interval points
/// that carry at least one `cache_*` field count: their `count` is the requests the shares are of, their
/// timestamps the time observed. An endpoint none of whose points carries one is not a row. Points a
/// filter leaves out still count in the time observed (``observe(_:)``), so a filter on the endpoint
/// (`--where module=shop`) picks rows without changing their savings per minute.
///
/// ```swift
/// var advice = CacheAdviceAggregator()
/// for point in intervalPoints { advice.add(point) }
/// let table = CacheAdviceTable(width: 120, colors: false)
/// print(table.render(advice.rows(), counts: advice.counts), terminator: "")
/// ```
///
/// ``SummaryAggregator`` keeps one (``SummaryAggregator/cacheAdvice``) fed with the interval points it
/// counts, so its filters apply. Memory grows with the number of endpoints only.
package struct CacheAdviceAggregator: Sendable {
    /// The interval points' measurement; points of any other are ignored.
    package let intervalMeasurement: String
    /// The length of one interval in nanoseconds, added to the time from the first to the last point to
    /// give the time observed (a point is stamped at the end of its interval, so the first one covers
    /// the interval before its timestamp). Default 10 s, the default ``AggregationOptions/interval``:
    /// points do not carry the length of their interval, and without an `instance` tag they are stamped
    /// anywhere within it, so it cannot be read off their timestamps. A reader that knows the agent's
    /// configuration (the demo) sets it.
    package var intervalNanoseconds: Int64
    /// Interval points read, and those that carried at least one `cache_*` field.
    package private(set) var intervalPoints = 0
    package private(set) var pointsWithCacheFields = 0
    /// Points with cache fields a filter left out (``observe(_:)``).
    package private(set) var pointsFilteredOut = 0
    /// The oldest and newest timestamps (nanoseconds since the epoch) of the points with cache fields.
    package private(set) var firstTimestamp: Int64?
    package private(set) var lastTimestamp: Int64?

    private var endpoints: [CacheAdviceRow.Endpoint: Totals] = [:]

    /// An empty aggregation of the points of `intervalMeasurement`, each interval `interval` long.
    package init(
        intervalMeasurement: String = PointSchema.Measurement.requestInterval,
        interval: Duration = AggregationOptions().interval
    ) {
        self.intervalMeasurement = intervalMeasurement
        let parts = interval.components
        self.intervalNanoseconds = max(0, parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }

    /// What one endpoint's points added up to.
    struct Totals: Sendable {
        /// Whether any of its points carried a cache field.
        var advised = false
        var figures = CacheAdviceRow.Figures()
    }

    /// Where a cache field's value is added.
    private enum Slot: Sendable {
        case storable, noStore, withLifetime, revalidated, servedLocally, repeated, repeatedMilliseconds
        case repeatedWithin(Int)
        case repeatedMillisecondsWithin(Int)
    }

    private static let slots: [String: Slot] = {
        typealias F = PointSchema.IntervalField
        var slots: [String: Slot] = [
            F.cacheStorable: .storable, F.cacheNoStore: .noStore, F.cacheWithLifetime: .withLifetime,
            F.cacheRevalidated: .revalidated, F.cacheServedLocally: .servedLocally, F.cacheRepeated: .repeated,
            F.cacheRepeatedMilliseconds: .repeatedMilliseconds,
        ]
        for (index, seconds) in F.cacheAgeBounds.enumerated() {
            slots[F.cacheRepeated(withinSeconds: seconds)] = .repeatedWithin(index)
            slots[F.cacheRepeatedMilliseconds(withinSeconds: seconds)] = .repeatedMillisecondsWithin(index)
        }
        return slots
    }()

    /// Adds one interval point; a point of another measurement, or without a host, path or method tag, is
    /// ignored.
    package mutating func add(_ point: Point) {
        guard point.measurement == intervalMeasurement, let host = point.tag(PointSchema.Tag.host),
            let path = point.tag(PointSchema.Tag.path), let method = point.tag(PointSchema.Tag.method)
        else { return }
        intervalPoints += 1
        let endpoint = CacheAdviceRow.Endpoint(
            host: host,
            path: path,
            method: method,
            module: point.tag(PointSchema.Tag.module)
        )
        var figures = CacheAdviceRow.Figures()
        var requests = 0
        var advised = false
        for field in point.fields {
            guard let value = field.value.number else { continue }
            if field.key == PointSchema.IntervalField.count {
                requests = Self.whole(value)
                continue
            }
            guard field.key.hasPrefix("cache_"), let slot = Self.slots[field.key] else { continue }
            advised = true
            switch slot {
            case .storable: figures.storable += Self.whole(value)
            case .noStore: figures.noStore += Self.whole(value)
            case .withLifetime: figures.withLifetime += Self.whole(value)
            case .revalidated: figures.revalidated += Self.whole(value)
            case .servedLocally: figures.servedLocally += Self.whole(value)
            case .repeated: figures.repeated += Self.whole(value)
            case .repeatedMilliseconds: figures.repeatedMilliseconds += Self.milliseconds(value)
            case .repeatedWithin(let index): figures.repeatedWithin[index] += Self.whole(value)
            case .repeatedMillisecondsWithin(let index):
                figures.repeatedMillisecondsWithin[index] += Self.milliseconds(value)
            }
        }
        guard advised else {
            if endpoints[endpoint] == nil { endpoints[endpoint] = Totals() }
            return
        }
        figures.requests = requests
        pointsWithCacheFields += 1
        observeTimestamp(of: point)
        endpoints[endpoint, default: Totals()].advised = true
        endpoints[endpoint, default: Totals()].figures.add(figures)
    }

    /// Counts a point of the interval measurement that a filter left out: in the time observed when it
    /// carries a cache field, in no row.
    package mutating func observe(_ point: Point) {
        guard point.measurement == intervalMeasurement,
            point.fields.contains(where: { $0.key.hasPrefix("cache_") && Self.slots[$0.key] != nil })
        else { return }
        pointsFilteredOut += 1
        observeTimestamp(of: point)
    }

    private mutating func observeTimestamp(of point: Point) {
        guard let timestamp = point.timestamp?.value(in: .ns) else { return }
        firstTimestamp = min(firstTimestamp ?? timestamp, timestamp)
        lastTimestamp = max(lastTimestamp ?? timestamp, timestamp)
    }

    private static func whole(_ value: Double) -> Int { Int(clamping: Int64(max(min(value, 1e18), 0))) }

    private static func milliseconds(_ value: Double) -> Double { value.isFinite ? max(value, 0) : 0 }

    /// The time observed, in nanoseconds: from the first to the last timestamp of the points with cache
    /// fields (those filters left out included), plus one interval (``intervalNanoseconds``); `nil` before any such point with a timestamp.
    package var observedNanoseconds: Int64? {
        guard let firstTimestamp, let lastTimestamp else { return nil }
        let (span, overflow) = lastTimestamp.subtractingReportingOverflow(firstTimestamp)
        return overflow ? Int64.max : span.addingReportingOverflow(intervalNanoseconds).partialValue
    }

    /// What was read besides the rows, for the table's footer.
    package var counts: CacheAdviceCounts {
        var counts = CacheAdviceCounts()
        counts.intervalPoints = intervalPoints
        counts.pointsWithCacheFields = pointsWithCacheFields
        counts.pointsFilteredOut = pointsFilteredOut
        counts.endpointsWithoutCacheFields = endpoints.values.filter { !$0.advised }.count
        counts.observedNanoseconds = observedNanoseconds
        counts.intervalNanoseconds = intervalNanoseconds
        return counts
    }

    /// One row per endpoint with cache fields, the most waiting saved first (then the most repeated, then
    /// by host, path, method and module).
    package func rows() -> [CacheAdviceRow] {
        let observed = observedNanoseconds
        return endpoints.compactMap { endpoint, totals in
            guard totals.advised else { return nil }
            return CacheAdviceRow(endpoint: endpoint, figures: totals.figures, observedNanoseconds: observed)
        }
        .sorted { a, b in
            if a.figures.repeatedMilliseconds != b.figures.repeatedMilliseconds {
                return a.figures.repeatedMilliseconds > b.figures.repeatedMilliseconds
            }
            if a.figures.repeated != b.figures.repeated { return a.figures.repeated > b.figures.repeated }
            return a.endpoint < b.endpoint
        }
    }
}

/// What a cache advice aggregation read besides its rows.
package struct CacheAdviceCounts: Sendable, Hashable {
    /// Interval points read.
    package var intervalPoints = 0
    /// Those that carried at least one `cache_*` field.
    package var pointsWithCacheFields = 0
    /// Points with cache fields a filter left out (in the time observed, in no row).
    package var pointsFilteredOut = 0
    /// Endpoints read none of whose points carried a cache field (the advisor off where they were recorded).
    package var endpointsWithoutCacheFields = 0
    /// The time observed (``CacheAdviceAggregator/observedNanoseconds``) and the interval length it includes.
    package var observedNanoseconds: Int64?
    package var intervalNanoseconds: Int64 = 10_000_000_000

    package init() {}
}

/// One endpoint's cache advice: what its interval points' `cache_*` fields added up to, and what they
/// suggest.
///
/// ```swift
/// if case .seconds(let maxAge) = row.lifetime, let saved = row.savedPerMinute {
///     print("max-age=\(maxAge) would have saved \(saved) ms of waiting per minute")
/// }
/// ```
package struct CacheAdviceRow: Sendable, Hashable {
    /// An endpoint: host, templated path, method and module.
    package struct Endpoint: Sendable, Hashable, Comparable {
        package var host: String
        package var path: String
        package var method: String
        /// The `module` tag; `nil` when the points carry none.
        package var module: String?

        package static func < (a: Endpoint, b: Endpoint) -> Bool {
            (a.host, a.path, a.method, a.module ?? "") < (b.host, b.path, b.method, b.module ?? "")
        }
    }

    /// The sums of an endpoint's cache fields (and `count`) over its points with cache fields.
    package struct Figures: Sendable, Hashable {
        /// Requests (`count`).
        package var requests = 0
        /// `cache_storable`: responses a cache may store.
        package var storable = 0
        /// `cache_no_store`: responses sent with `Cache-Control: no-store`.
        package var noStore = 0
        /// `cache_with_lifetime`: responses stating a `max-age` or `Expires` above zero.
        package var withLifetime = 0
        /// `cache_revalidated`: 304 responses.
        package var revalidated = 0
        /// `cache_served_locally`: responses a local cache served.
        package var servedLocally = 0
        /// `cache_repeated`: responses whose body was that of the previous response of the same URL.
        package var repeated = 0
        /// `cache_repeated_ms`: the waiting of those, in milliseconds.
        package var repeatedMilliseconds = 0.0
        /// `cache_repeated_le_<s>` per bound of ``PointSchema/IntervalField/cacheAgeBounds``.
        package var repeatedWithin = Array(repeating: 0, count: PointSchema.IntervalField.cacheAgeBounds.count)
        /// `cache_repeated_ms_le_<s>` per bound of ``PointSchema/IntervalField/cacheAgeBounds``.
        package var repeatedMillisecondsWithin = Array(
            repeating: 0.0,
            count: PointSchema.IntervalField.cacheAgeBounds.count
        )

        package init() {}

        mutating func add(_ other: Figures) {
            requests += other.requests
            storable += other.storable
            noStore += other.noStore
            withLifetime += other.withLifetime
            revalidated += other.revalidated
            servedLocally += other.servedLocally
            repeated += other.repeated
            repeatedMilliseconds += other.repeatedMilliseconds
            for index in repeatedWithin.indices {
                repeatedWithin[index] += other.repeatedWithin[index]
                repeatedMillisecondsWithin[index] += other.repeatedMillisecondsWithin[index]
            }
        }
    }

    /// The lifetime (`max-age`) that would have caught most repeated responses.
    package enum Lifetime: Sendable, Hashable {
        /// Nothing repeated.
        case nothingRepeated
        /// The shortest bound of ``PointSchema/IntervalField/cacheAgeBounds``, in seconds, whose
        /// `cache_repeated_le_<s>` is at least half of `cache_repeated`.
        case seconds(Int64)
        /// Most repeated responses came longer than the longest bound (1 h) after their identical previous one.
        case beyondLongestBound
    }

    package var endpoint: Endpoint
    package var figures: Figures
    /// The time observed, in nanoseconds (``CacheAdviceAggregator/observedNanoseconds``): the same for
    /// every row of an aggregation.
    package var observedNanoseconds: Int64?

    package init(endpoint: Endpoint, figures: Figures, observedNanoseconds: Int64?) {
        self.endpoint = endpoint
        self.figures = figures
        self.observedNanoseconds = observedNanoseconds
    }

    /// Repeated responses as a share of requests (0 without requests).
    package var repeatedShare: Double {
        figures.requests > 0 ? Double(figures.repeated) / Double(figures.requests) : 0
    }

    /// The index in ``PointSchema/IntervalField/cacheAgeBounds`` of ``lifetime``'s bound, if it is one.
    package var lifetimeIndex: Int? {
        guard figures.repeated > 0 else { return nil }
        return figures.repeatedWithin.firstIndex { 2 * $0 >= figures.repeated }
    }

    /// The lifetime that would have caught most of its repeated responses.
    package var lifetime: Lifetime {
        guard figures.repeated > 0 else { return .nothingRepeated }
        guard let index = lifetimeIndex else { return .beyondLongestBound }
        return .seconds(PointSchema.IntervalField.cacheAgeBounds[index])
    }

    /// Repeated responses that lifetime would have served, as a share of requests; `nil` without one.
    package var caughtShare: Double? {
        guard let index = lifetimeIndex, figures.requests > 0 else { return nil }
        return Double(figures.repeatedWithin[index]) / Double(figures.requests)
    }

    /// The waiting that lifetime would have saved, in milliseconds; `nil` without one.
    package var lifetimeSavedMilliseconds: Double? {
        lifetimeIndex.map { figures.repeatedMillisecondsWithin[$0] }
    }

    /// The waiting that lifetime would have saved per minute observed, in milliseconds; `nil` without a
    /// lifetime or a time observed.
    package var savedPerMinute: Double? {
        guard let saved = lifetimeSavedMilliseconds, let observedNanoseconds, observedNanoseconds > 0 else {
            return nil
        }
        return saved / (Double(observedNanoseconds) / 60e9)
    }
}
