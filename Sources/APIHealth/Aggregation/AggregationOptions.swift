import Foundation

/// How requests are summed into one point per endpoint and interval (see ``PointSchema/IntervalField``):
/// counts, errors, duration sum, minimum and maximum, bytes, and a duration histogram that replicas and
/// intervals merge by adding.
///
/// ```swift
/// var configuration = try APIHealthConfiguration.fromEnvironment(serviceName: "checkout")
/// configuration.aggregation?.interval = .seconds(30)
/// configuration.aggregation?.durationBoundaries.append(.milliseconds(300))  // an SLO threshold, counted exactly
/// ```
public struct AggregationOptions: Sendable, Hashable {
    /// How long each interval lasts; points are stamped at its end, a whole multiple of it since the
    /// Unix epoch, so every replica's intervals line up. Default 10 s (`APIHEALTH_AGGREGATION_INTERVAL_MS`).
    public var interval: Duration = .seconds(10)
    /// The upper bounds of the duration histogram's buckets (a request of exactly a bound counts in its
    /// bucket, as Prometheus' `le`). Sorted and de-duplicated when the agent starts; a bucket above the
    /// last bound (`le_inf`) is always there. Default ``defaultDurationBoundaries``.
    public var durationBoundaries: [Duration] = Self.defaultDurationBoundaries
    /// The measurement of interval points (default ``PointSchema/Measurement/requestInterval``).
    public var measurement = PointSchema.Measurement.requestInterval
    /// Distinct endpoints (host, path, method, module, status class) with an aggregate of their own;
    /// the requests of any further endpoint are counted in one overflow series whose endpoint tags are
    /// ``APIHealthConfiguration/CaptureOptions/overflowPath``, so totals stay exact. Default 2,000, as
    /// OpenTelemetry's cardinality limit (`APIHEALTH_MAXIMUM_ENDPOINTS`).
    public var maximumEndpoints = 2_000
    /// How long an endpoint may go without a request before its aggregate is evicted (its place under
    /// ``maximumEndpoints`` given back); a later request makes it again. Rounded up to whole intervals, at
    /// least one. Default 5 minutes.
    public var idleEviction: Duration = .seconds(300)

    /// The defaults: 10 s intervals, ``defaultDurationBoundaries``, 2,000 endpoints, evicted after 5 idle minutes.
    public init() {}

    /// 50 bounds from 1 ms to 60 s: from 5 ms to 2 s no bucket is wider than 25 % of its lower bound, and
    /// round values (100, 250, 300, 500 ms, 1 s) are bounds, so "the share under 300 ms" is exact.
    public static let defaultDurationBoundaries: [Duration] = [
        1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 18, 20, 25, 30, 35, 40, 50, 60, 70, 80, 100, 120, 150, 180, 200, 250,
        300, 350, 400, 500, 600, 700, 800, 1_000, 1_200, 1_500, 1_800, 2_000, 2_500, 3_000, 4_000, 5_000, 7_500,
        10_000, 15_000, 20_000, 30_000, 45_000, 60_000,
    ].map { Duration.milliseconds($0) }
}

/// Which requests are also written as a point of their own (``PointSchema/Measurement/request``), beside
/// the interval aggregates every request is counted in.
///
/// ```swift
/// configuration.capture.rawPoints = .errorsAndSlow                   // failures, slow ones, a 0.5 % sample
/// configuration.capture.rawPoints = .errorsAndSlow(slowerThan: .milliseconds(500), sampleRate: 0.001)
/// configuration.capture.rawPoints = .errorsAndSlow(maximumPerSecond: 20)  // a larger incident budget
/// ```
///
/// With ``errorsAndSlow``, each endpoint writes at most ``maximumPerSecond`` failed or slow requests per
/// second as raw points, on average (a budget of that many times the aggregation interval, renewed every
/// interval; the uniform sample of the other requests is beside it): an upstream
/// that fails every request still writes a bounded number of points, and every request is still counted
/// in its interval point.
public struct RawPoints: Sendable, Hashable, CustomStringConvertible {
    enum Mode: Hashable { case all, errorsAndSlow, none }

    let mode: Mode
    /// With ``errorsAndSlow``: a request at least this slow is written.
    public let slowerThan: Duration
    /// With ``errorsAndSlow``: the share of the other requests written, chosen uniformly at random.
    public let sampleRate: Double
    /// With ``errorsAndSlow``: failed or slow requests per second an endpoint writes raw at most, on average over an
    /// aggregation interval (`APIHEALTH_RAW_POINTS_PER_SECOND`). Default ``defaultMaximumPerSecond``.
    public let maximumPerSecond: Double

    /// 5 failed or slow requests per second and endpoint written raw: 50 per 10 s interval.
    public static let defaultMaximumPerSecond: Double = 5

    private init(
        mode: Mode,
        slowerThan: Duration = .seconds(1),
        sampleRate: Double = 0.005,
        maximumPerSecond: Double = Self.defaultMaximumPerSecond
    ) {
        self.mode = mode
        self.slowerThan = slowerThan
        self.sampleRate = sampleRate
        self.maximumPerSecond = maximumPerSecond
    }

    /// Every request: what a single instance at low traffic, and `influx-tail`, show best.
    public static let all = RawPoints(mode: .all)
    /// None: counts, error rates and percentiles come from the interval aggregates alone.
    public static let none = RawPoints(mode: .none)
    /// Every failed request, every request slower than 1 s or than its endpoint's p99 (the upper bound of
    /// the histogram bucket holding the p99 of its last interval of at least 100 requests), and 0.5 % of
    /// the rest; failed and slow ones up to 5 per second and endpoint (``defaultMaximumPerSecond``). The
    /// default.
    public static let errorsAndSlow = RawPoints(mode: .errorsAndSlow)

    /// Every failed request, every request slower than `slowerThan` or than its endpoint's p99, and a
    /// uniform sample of the rest; failed and slow ones up to `maximumPerSecond` per endpoint.
    ///
    /// - Parameters:
    ///   - slowerThan: A request at least this slow is written.
    ///   - sampleRate: The share of the other requests written, from 0 to 1.
    ///   - maximumPerSecond: Failed or slow requests written raw per second and endpoint at most, on
    ///     average over an interval.
    /// - Returns: The setting for ``APIHealthConfiguration/CaptureOptions/rawPoints``.
    public static func errorsAndSlow(
        slowerThan: Duration = .seconds(1),
        sampleRate: Double = 0.005,
        maximumPerSecond: Double = defaultMaximumPerSecond
    ) -> RawPoints {
        RawPoints(
            mode: .errorsAndSlow,
            slowerThan: slowerThan,
            sampleRate: sampleRate,
            maximumPerSecond: maximumPerSecond
        )
    }

    /// `all`, `errors-and-slow` or `none`, as `APIHEALTH_RAW_POINTS` takes them.
    public var description: String {
        switch mode {
        case .all: "all"
        case .errorsAndSlow: "errors-and-slow"
        case .none: "none"
        }
    }

    /// The value `APIHEALTH_RAW_POINTS` names (`all`, `errors-and-slow`, `none`), else `nil`.
    init?(environmentValue: String) {
        switch environmentValue.lowercased() {
        case "all": self = .all
        case "errors-and-slow", "errorsandslow", "errors_and_slow": self = .errorsAndSlow
        case "none": self = .none
        default: return nil
        }
    }
}
