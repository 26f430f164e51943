import APIHealth
import Foundation
import LineProtocol

/// Sums the cache advisor's fields (``PointSchema/cacheIntervalFields``) of interval points per endpoint
/// (host, path, method and module, across status classes and intervals) into rows ranked by the waiting a
/// cache would have saved: what `influx-tail --cache` and the "What to cache" section of `--summary`
/// print (``CacheAdviceTable``).
///
/// The advisor is opt-in (``APIHealthConfiguration/CaptureOptions/cacheAdvice``), so only interval points
/// that carry at least one `cache_*` field count: their `cache_judged` is what the hit and stale shares are
/// of, their `count` what the header shares are of, their timestamps the time observed. An endpoint none of
/// whose points carries one is not a row. Points a filter leaves out still count in the time observed (``observe(_:)``), so a filter on the endpoint
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
        case judged, storable, noStore, withLifetime, revalidated, servedLocally, privateOnly, coalescable
        case coalescableMilliseconds
        case hits(Int)
        case hitsMilliseconds(Int)
        case stale(Int)
    }

    private static let slots: [String: Slot] = {
        typealias F = PointSchema.IntervalField
        var slots: [String: Slot] = [
            F.cacheJudged: .judged, F.cacheStorable: .storable, F.cacheNoStore: .noStore,
            F.cacheWithLifetime: .withLifetime, F.cacheRevalidated: .revalidated,
            F.cacheServedLocally: .servedLocally, F.cachePrivateOnly: .privateOnly,
            F.cacheCoalescable: .coalescable, F.cacheCoalescableMilliseconds: .coalescableMilliseconds,
        ]
        for (index, seconds) in F.cacheAgeBounds.enumerated() {
            slots[F.cacheHits(lifetime: seconds)] = .hits(index)
            slots[F.cacheHitsMilliseconds(lifetime: seconds)] = .hitsMilliseconds(index)
            slots[F.cacheStale(lifetime: seconds)] = .stale(index)
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
            case .judged: figures.judged += Self.whole(value)
            case .storable: figures.storable += Self.whole(value)
            case .noStore: figures.noStore += Self.whole(value)
            case .withLifetime: figures.withLifetime += Self.whole(value)
            case .revalidated: figures.revalidated += Self.whole(value)
            case .servedLocally: figures.servedLocally += Self.whole(value)
            case .privateOnly: figures.privateOnly += Self.whole(value)
            case .coalescable: figures.coalescable += Self.whole(value)
            case .coalescableMilliseconds: figures.coalescableMilliseconds += Self.milliseconds(value)
            case .hits(let index): figures.hits[index] += Self.whole(value)
            case .hitsMilliseconds(let index): figures.hitsMilliseconds[index] += Self.milliseconds(value)
            case .stale(let index): figures.stale[index] += Self.whole(value)
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

    /// One row per endpoint with cache fields, the most waiting its advised lifetime saves first (then the
    /// most judged, then by host, path, method and module).
    package func rows() -> [CacheAdviceRow] {
        let observed = observedNanoseconds
        return endpoints.compactMap { endpoint, totals in
            guard totals.advised else { return nil }
            return CacheAdviceRow(endpoint: endpoint, figures: totals.figures, observedNanoseconds: observed)
        }
        .sorted { a, b in
            let (savedA, savedB) = (a.lifetimeSavedMilliseconds ?? 0, b.lifetimeSavedMilliseconds ?? 0)
            if savedA != savedB { return savedA > savedB }
            if a.figures.judged != b.figures.judged { return a.figures.judged > b.figures.judged }
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
        /// Requests (`count`): every request of the endpoint, what the header shares are of.
        package var requests = 0
        /// `cache_judged`: responses the simulated caches judged, what the hit and stale shares are of.
        package var judged = 0
        /// `cache_storable`: responses a cache may store.
        package var storable = 0
        /// `cache_no_store`: responses sent with `Cache-Control: no-store`.
        package var noStore = 0
        /// `cache_with_lifetime`: responses with a lifetime above zero (stated or heuristic).
        package var withLifetime = 0
        /// `cache_revalidated`: 304 responses.
        package var revalidated = 0
        /// `cache_served_locally`: responses a local cache served.
        package var servedLocally = 0
        /// `cache_private_only`: responses that are one user's (never for a shared cache).
        package var privateOnly = 0
        /// `cache_coalescable`: requests in flight beside an earlier one of their key.
        package var coalescable = 0
        /// `cache_coalescable_ms`: their waiting, in milliseconds.
        package var coalescableMilliseconds = 0.0
        /// `cache_hits_le_<s>` per lifetime of ``PointSchema/IntervalField/cacheAgeBounds``.
        package var hits = Array(repeating: 0, count: PointSchema.IntervalField.cacheAgeBounds.count)
        /// `cache_hits_ms_le_<s>` per lifetime.
        package var hitsMilliseconds = Array(repeating: 0.0, count: PointSchema.IntervalField.cacheAgeBounds.count)
        /// `cache_stale_le_<s>` per lifetime.
        package var stale = Array(repeating: 0, count: PointSchema.IntervalField.cacheAgeBounds.count)

        package init() {}

        mutating func add(_ other: Figures) {
            requests += other.requests
            judged += other.judged
            storable += other.storable
            noStore += other.noStore
            withLifetime += other.withLifetime
            revalidated += other.revalidated
            servedLocally += other.servedLocally
            privateOnly += other.privateOnly
            coalescable += other.coalescable
            coalescableMilliseconds += other.coalescableMilliseconds
            for index in hits.indices {
                hits[index] += other.hits[index]
                hitsMilliseconds[index] += other.hitsMilliseconds[index]
                stale[index] += other.stale[index]
            }
        }
    }

    /// The lifetime (`max-age`) advised for an endpoint.
    package enum Lifetime: Sendable, Hashable {
        /// No simulated cache would have served anything.
        case nothingServed
        /// The longest candidate lifetime, in seconds, whose stale share stays under
        /// ``CacheAdviceRow/staleThreshold`` and that would have served something.
        case seconds(Int64)
        /// Every lifetime that would have served something would also have served changed bodies at or
        /// past the threshold.
        case tooStale
    }

    /// The share of judged responses a lifetime's stale ones must stay under to be advised: 1 %.
    package static let staleThreshold = 0.01

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

    /// The share of judged responses `count` is (0 with none judged).
    package func shareOfJudged(_ count: Int) -> Double {
        figures.judged > 0 ? Double(count) / Double(figures.judged) : 0
    }

    /// The index in ``PointSchema/IntervalField/cacheAgeBounds`` of the advised lifetime, if there is one.
    package var lifetimeIndex: Int? {
        figures.hits.indices.last { index in
            figures.hits[index] > 0 && shareOfJudged(figures.stale[index]) < Self.staleThreshold
        }
    }

    /// The lifetime advised: the longest whose stale share stays under ``staleThreshold``.
    package var lifetime: Lifetime {
        guard figures.hits.contains(where: { $0 > 0 }) else { return .nothingServed }
        guard let index = lifetimeIndex else { return .tooStale }
        return .seconds(PointSchema.IntervalField.cacheAgeBounds[index])
    }

    /// The share of judged responses the advised lifetime would have served; `nil` without one.
    package var hitShare: Double? { lifetimeIndex.map { shareOfJudged(figures.hits[$0]) } }

    /// The share of judged responses the advised lifetime would have served changed; `nil` without one.
    package var staleShare: Double? { lifetimeIndex.map { shareOfJudged(figures.stale[$0]) } }

    /// Whether a shared cache (a CDN, a proxy) may follow the advice: no response was one user's.
    package var sharedCacheAllowed: Bool { figures.privateOnly == 0 }

    /// The waiting the advised lifetime would have saved, in milliseconds; `nil` without one.
    package var lifetimeSavedMilliseconds: Double? {
        lifetimeIndex.map { figures.hitsMilliseconds[$0] }
    }

    /// The waiting the advised lifetime would have saved per minute observed, in milliseconds; `nil`
    /// without a lifetime or a time observed.
    package var savedPerMinute: Double? {
        guard let saved = lifetimeSavedMilliseconds, let observedNanoseconds, observedNanoseconds > 0 else {
            return nil
        }
        return saved / (Double(observedNanoseconds) / 60e9)
    }
}
