@_spi(Package) import APIHealth
import CoreMetrics
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A swift-metrics backend that ships every Counter, Meter, Recorder and Timer through an
/// `APIHealthAgent`: the same batches, spool, retries and self-metrics as its request points.
///
/// ```swift
/// let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "checkout"), logger: logger)
/// MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent))
///
/// Counter(label: "orders_placed", dimensions: [("region", "eu")]).increment()
/// Timer(label: "db_query").recordNanoseconds(1_250_000)
/// ```
///
/// Handlers aggregate in memory; every ``Configuration/interval`` (and once more when the agent shuts
/// down) the factory writes one point per label and dimensions, measurement = prefix + label, tags =
/// dimensions plus `metric_type` (see ``MetricsSchema``):
/// - `Counter`: cumulative unsigned `count`; `FloatingPointCounter`: cumulative float `value`.
/// - `Meter` and a non-aggregating `Recorder` (`Gauge`): the last float `value`.
/// - `Timer` (milliseconds) and an aggregating `Recorder`: the interval's `count`, `sum`, `min`, `max`,
///   `mean`, and a histogram, `le_<bound>` per bucket bound (cumulative over the bounds) and `le_inf`, which
///   replicas and intervals merge by adding (a fleet p99 is a `histogram_quantile` of their sums); with
///   ``Configuration/writesQuantiles``, also this replica's `p50`, `p90`, `p95`, `p99`. Nothing for an
///   interval without values.
///
/// Counters and meters keep reporting their value every interval. Past ``Configuration/maximumSeries``
/// handlers, new ones share one overflow series per kind (label ``MetricsSchema/overflowLabel``), counted
/// in the agent's `metrics_overflowed`. Destroying a handler releases it after its last value is written.
public final class APIHealthMetricsFactory: MetricsFactory, Sendable {
    /// How often and under which names the factory writes.
    public struct Configuration: Sendable {
        /// How often each series is written. Default 10 s.
        public var interval: Duration = .seconds(10)
        /// Put in front of every label to make the measurement name (e.g. `"app_"`). Default none.
        public var measurementPrefix: String = ""
        /// The most distinct (kind, label, dimensions) series kept; past it new handlers share the overflow
        /// series. Default 10,000.
        public var maximumSeries: Int = 10_000
        /// Writes the measurement (prefix and label) and the dimension keys with `_` in place of every
        /// character other than an ASCII letter, digit or `_`: `http.server.request.duration` becomes
        /// `http_server_request_duration`, `http.route` becomes `http_route`. VictoriaMetrics names a
        /// series `<measurement>_<field>` and labels it with the tags, and PromQL reads a name with a dot
        /// only quoted (`{"http.server.request.duration_p99"}`); with this on, `http_server_request_duration_p99`
        /// reads as is. Tag values are kept as they are. Default `false`: names as given.
        ///
        /// ```swift
        /// var options = APIHealthMetricsFactory.Configuration()
        /// options.writesUnderscoredNames = true
        /// MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent, configuration: options))
        /// ```
        public var writesUnderscoredNames = false
        /// The bucket bounds of every timer's histogram. Default the request histogram's
        /// (`AggregationOptions.defaultDurationBoundaries`).
        public var timerBuckets: [Duration] = AggregationOptions.defaultDurationBoundaries
        /// The bucket bounds of every aggregating recorder's histogram, in its values' unit. Default 1, 2.5
        /// and 5 of each power of ten from 0.01 to 10,000,000.
        public var recorderBuckets: [Double] = (-2...7).flatMap { exponent in
            [1.0, 2.5, 5].map { $0 * pow(10, Double(exponent)) }
        }
        /// Also writes each timer's and recorder's p50, p90, p95 and p99 of the interval (nearest rank, within
        /// 1 %). They describe one replica only and cannot be added up; the histogram can. Default `false`.
        public var writesQuantiles = false

        /// The defaults: 10 s intervals, no prefix, 10,000 series, names as given, no quantiles.
        public init() {}
    }

    /// The settings the factory was made with.
    public let configuration: Configuration
    private let agent: APIHealthAgent
    private let precision: Precision
    /// `service`, `instance` and the global tags, on every series.
    private let everyPointTags: [Point.Tag]
    private let timerBounds: HistogramBounds
    private let recorderBounds: HistogramBounds
    /// Guards which handler stands for which series.
    private let registry = Locked(Registry())
    /// Guards the last timestamp written, and makes flushes take turns.
    private let lastTimestamp = Locked<Int64>(Int64.min)

    /// Makes a factory that writes through `agent` at the end of every interval while the agent runs.
    ///
    /// The factory writes a last time when the agent begins to shut down (`APIHealthAgent.onShutdown(_:)`),
    /// before intake closes, so nothing recorded before shutdown is lost.
    ///
    /// - Parameters:
    ///   - agent: Where the points go.
    ///   - configuration: Interval, measurement prefix and cardinality cap.
    public init(agent: APIHealthAgent, configuration: Configuration = Configuration()) {
        precondition(configuration.interval > .zero, "APIHealthMetricsFactory interval must be positive")
        self.agent = agent
        self.configuration = configuration
        self.precision = agent.configuration.precision
        self.everyPointTags = agent.configuration.everyPointTags
        self.timerBounds = HistogramBounds(
            written: configuration.timerBuckets.map {
                Double($0.components.seconds) * 1e3 + Double($0.components.attoseconds) / 1e15
            },
            divisor: 1e6
        )
        self.recorderBounds = HistogramBounds(written: configuration.recorderBuckets, divisor: 1)
        agent.onShutdown { [weak self] in self?.flush() }
        // On the agent's interval clock, with its interval points and health point: ends are whole
        // multiples of the interval since the Unix epoch, and nothing runs while the agent does not.
        agent.everyInterval(configuration.interval) { [weak self] in
            guard let self else { return false }
            self.flush()
            return true
        }
    }

    /// Writes one point per series now (what the agent's interval clock does every interval).
    public func flush() {
        let handlers = registry.withLock { $0.collectable() }
        lastTimestamp.withLock { last in
            let unit = precision.nanosecondsPerUnit
            var value = agent.nowTimestamp.nanosecondsSinceEpoch / unit
            if value <= last { value = last + 1 }  // one point per series and timestamp, even at shutdown
            last = value
            let timestamp = Timestamp(value, precision: precision)
            var fields: [Point.Field] = []
            fields.reserveCapacity(MetricsSchema.fields.count)
            for handler in handlers {
                fields.removeAll(keepingCapacity: true)
                handler.collect(into: &fields)
                guard !fields.isEmpty else { continue }
                agent.write(
                    Point(
                        measurement: handler.key.measurement,
                        tags: handler.key.tags,
                        fields: fields,
                        timestamp: timestamp
                    )
                )
            }
        }
    }

    /// How many series the factory holds, destroyed ones not yet released included (overflow excluded).
    var seriesCount: Int { registry.withLock { $0.live.count + $0.retired.count } }

    // MARK: MetricsFactory

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        handler(.counter, label, dimensions) { CounterStorage.make(key: $0) } as! CounterStorage
    }

    public func makeFloatingPointCounter(
        label: String,
        dimensions: [(String, String)]
    ) -> any FloatingPointCounterHandler {
        handler(.floatingPointCounter, label, dimensions) { FloatingCounterStorage(key: $0) } as! FloatingCounterStorage
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        handler(.meter, label, dimensions) { LastValueStorage(key: $0) } as! LastValueStorage
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return handler(.recorder, label, dimensions) {
                DistributionStorage(
                    key: $0,
                    divisor: 1,
                    bounds: recorderBounds,
                    quantiles: configuration.writesQuantiles
                )
            } as! DistributionStorage
        }
        return handler(.gauge, label, dimensions) { LastValueStorage(key: $0) } as! LastValueStorage
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        handler(.timer, label, dimensions) {
            DistributionStorage(key: $0, divisor: 1e6, bounds: timerBounds, quantiles: configuration.writesQuantiles)
        } as! DistributionStorage
    }

    public func destroyCounter(_ handler: any CounterHandler) { destroy(handler) }
    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { destroy(handler) }
    public func destroyMeter(_ handler: any MeterHandler) { destroy(handler) }
    public func destroyRecorder(_ handler: any RecorderHandler) { destroy(handler) }
    public func destroyTimer(_ handler: any TimerHandler) { destroy(handler) }

    private func handler(
        _ kind: SeriesIdentity.Kind,
        _ label: String,
        _ dimensions: [(String, String)],
        make: (SeriesIdentity) -> MetricHandler
    ) -> MetricHandler {
        // A series made before under the same name and dimensions (a middleware makes its counter
        // and timer again for every request): found by the name as given, without normalising or
        // sorting its tags.
        let named = NamedSeries(kind: kind, label: label, dimensions: dimensions)
        if let known = registry.withLock({ $0.byName[named] }) { return known }
        let key = SeriesIdentity(
            kind: kind,
            measurement: name(configuration.measurementPrefix + label),
            dimensions: configuration.writesUnderscoredNames ? dimensions.map { (name($0.0), $0.1) } : dimensions,
            everyPointTags: everyPointTags
        )
        let (handler, overflowed) = registry.withLock { registry -> (MetricHandler, Bool) in
            if let live = registry.live[key] {
                registry.remember(named, live, maximum: configuration.maximumSeries)
                return (live, false)
            }
            if let revived = registry.retired.removeValue(forKey: key) {
                registry.live[key] = revived
                registry.remember(named, revived, maximum: configuration.maximumSeries)
                return (revived, false)
            }
            if registry.live.count + registry.retired.count >= configuration.maximumSeries {
                if let shared = registry.overflow[kind] { return (shared, true) }
                let shared = make(
                    SeriesIdentity(
                        kind: kind,
                        measurement: name(configuration.measurementPrefix + MetricsSchema.overflowLabel),
                        dimensions: [],
                        everyPointTags: everyPointTags
                    )
                )
                registry.overflow[kind] = shared
                return (shared, true)
            }
            let made = make(key)
            registry.live[key] = made
            registry.remember(named, made, maximum: configuration.maximumSeries)
            return (made, false)
        }
        if overflowed { agent.countMetricsOverflowed() }
        return handler
    }

    /// `text` as a measurement or tag key is written: with ``Configuration/writesUnderscoredNames``,
    /// every character other than an ASCII letter, digit or `_` becomes `_`.
    private func name(_ text: String) -> String {
        guard configuration.writesUnderscoredNames else { return text }
        let isPlain = { (scalar: Unicode.Scalar) in
            scalar.isASCII && (scalar == "_" || scalar.properties.isAlphabetic || ("0"..."9").contains(scalar))
        }
        guard !text.unicodeScalars.allSatisfy(isPlain) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isPlain($0) ? $0 : "_" }))
    }

    private func destroy(_ handler: AnyObject) {
        guard let handler = handler as? MetricHandler else { return }
        registry.withLock { registry in
            guard let live = registry.live[handler.key], live === handler else { return }
            registry.live.removeValue(forKey: handler.key)
            // Made again, it is found through its identity (and revived).
            registry.forget(handler)
            registry.retired[handler.key] = handler
        }
    }
}

/// Which handler stands for which series.
struct Registry {
    var live: [SeriesIdentity: MetricHandler] = [:]
    /// Destroyed, not yet released: written until no one holds them, then once more and dropped. Made
    /// again before that, a handler comes back with its value.
    var retired: [SeriesIdentity: MetricHandler] = [:]
    /// The shared series of handlers made past the cap, one per kind.
    var overflow: [SeriesIdentity.Kind: MetricHandler] = [:]
    /// The live handlers by the names they were made with (never an overflow one: each of those is
    /// counted).
    var byName: [NamedSeries: MetricHandler] = [:]
    /// The names each handler in `byName` is found by, to forget them when it retires.
    var names: [ObjectIdentifier: [NamedSeries]] = [:]

    /// Finds `handler` by `named` from now on; past `maximum` × 2 names, the names found so far are
    /// forgotten (found again through their identities).
    mutating func remember(_ named: NamedSeries, _ handler: MetricHandler, maximum: Int) {
        if byName.count >= (maximum > Int.max / 2 ? Int.max : maximum * 2) {
            byName.removeAll(keepingCapacity: true)
            names.removeAll(keepingCapacity: true)
        }
        if let previous = byName.updateValue(handler, forKey: named) {
            if previous === handler { return }
            names[ObjectIdentifier(previous)]?.removeAll { $0 == named }
        }
        names[ObjectIdentifier(handler), default: []].append(named)
    }

    /// Finds `handler` by none of its names any more.
    mutating func forget(_ handler: MetricHandler) {
        for named in names.removeValue(forKey: ObjectIdentifier(handler)) ?? [] { byName.removeValue(forKey: named) }
    }

    /// Every handler to write this interval; retired ones that only the registry holds are dropped
    /// (and written this last time).
    mutating func collectable() -> [MetricHandler] {
        var handlers = Array(live.values)
        handlers.reserveCapacity(live.count + retired.count + overflow.count)
        handlers.append(contentsOf: overflow.values)
        for key in Array(retired.keys) {
            // Taken out, so the only other reference the registry could hold is gone while asking.
            var handler = retired.removeValue(forKey: key)!
            if !isKnownUniquelyReferenced(&handler) { retired[key] = handler }
            handlers.append(handler)
        }
        return handlers
    }
}

/// A series as its maker named it: kind, label and dimensions in the order given, before names are
/// normalised and tags sorted (several may stand for one ``SeriesIdentity``).
struct NamedSeries: Hashable {
    let kind: SeriesIdentity.Kind
    let label: String
    /// The dimensions as the handler was asked for them (the caller's array, not a copy).
    let dimensions: [(String, String)]

    init(kind: SeriesIdentity.Kind, label: String, dimensions: [(String, String)]) {
        self.kind = kind
        self.label = label
        self.dimensions = dimensions
    }

    static func == (lhs: NamedSeries, rhs: NamedSeries) -> Bool {
        lhs.kind == rhs.kind && lhs.label == rhs.label && lhs.dimensions.count == rhs.dimensions.count
            && zip(lhs.dimensions, rhs.dimensions).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(label)
        hasher.combine(dimensions.count)
        for (key, value) in dimensions {
            hasher.combine(key)
            hasher.combine(value)
        }
    }
}

/// A series: the kind of handler, its measurement, and its tags (dimensions, sorted, plus `metric_type`).
struct SeriesIdentity: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case counter, floatingPointCounter, meter, gauge, recorder, timer

        var tagValue: String {
            switch self {
            case .counter: MetricsSchema.MetricType.counter
            case .floatingPointCounter: MetricsSchema.MetricType.floatingPointCounter
            case .meter: MetricsSchema.MetricType.meter
            case .gauge: MetricsSchema.MetricType.gauge
            case .recorder: MetricsSchema.MetricType.recorder
            case .timer: MetricsSchema.MetricType.timer
            }
        }
    }

    let kind: Kind
    let measurement: String
    let tags: [Point.Tag]

    init(kind: Kind, measurement: String, dimensions: [(String, String)], everyPointTags: [Point.Tag] = []) {
        self.kind = kind
        self.measurement = measurement
        // The last value of a repeated key wins; order does not make a different series. A dimension
        // named like one of the agent's own tags (`service`, `instance`, a global tag) keeps its value.
        var byKey: [String: String] = [:]
        for tag in everyPointTags { byKey[tag.key] = tag.value }
        for (key, value) in dimensions where key != MetricsSchema.Tag.metricType { byKey[key] = value }
        var tags = byKey.map { Point.Tag($0.key, $0.value) }
        tags.append(Point.Tag(MetricsSchema.Tag.metricType, kind.tagValue))
        tags.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        self.tags = tags
    }
}
