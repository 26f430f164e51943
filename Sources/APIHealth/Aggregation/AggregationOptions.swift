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

    /// The defaults: 10 s intervals, ``defaultDurationBoundaries``.
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
/// ```
public struct RawPoints: Sendable, Hashable, CustomStringConvertible {
    enum Mode: Hashable { case all, errorsAndSlow, none }

    let mode: Mode
    /// With ``errorsAndSlow``: a request at least this slow is written.
    public let slowerThan: Duration
    /// With ``errorsAndSlow``: the share of the other requests written, chosen uniformly at random.
    public let sampleRate: Double

    private init(mode: Mode, slowerThan: Duration = .seconds(1), sampleRate: Double = 0.005) {
        self.mode = mode
        self.slowerThan = slowerThan
        self.sampleRate = sampleRate
    }

    /// Every request (the default): what a single instance, and `influx-tail`, show best.
    public static let all = RawPoints(mode: .all)
    /// None: counts, error rates and percentiles come from the interval aggregates alone.
    public static let none = RawPoints(mode: .none)
    /// Every failed request, every request slower than 1 s or than its endpoint's p99 (the upper bound of
    /// the histogram bucket holding the p99 of its last interval of at least 100 requests), and 0.5 % of
    /// the rest.
    public static let errorsAndSlow = RawPoints(mode: .errorsAndSlow)

    /// Every failed request, every request slower than `slowerThan` or than its endpoint's p99, and a
    /// uniform sample of the rest.
    ///
    /// - Parameters:
    ///   - slowerThan: A request at least this slow is written.
    ///   - sampleRate: The share of the other requests written, from 0 to 1.
    /// - Returns: The setting for ``APIHealthConfiguration/CaptureOptions/rawPoints``.
    public static func errorsAndSlow(slowerThan: Duration = .seconds(1), sampleRate: Double = 0.005) -> RawPoints {
        RawPoints(mode: .errorsAndSlow, slowerThan: slowerThan, sampleRate: sampleRate)
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
