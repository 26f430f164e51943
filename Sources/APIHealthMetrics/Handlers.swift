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

/// What every handler the factory makes shares: the series it writes, and how to read its fields.
///
/// A class (not a protocol) so the registry can ask `isKnownUniquelyReferenced` whether a destroyed
/// handler is still held by anyone.
class MetricHandler: @unchecked Sendable {  // Subclasses keep their state behind a `Locked` or in atomics.
    let key: SeriesIdentity

    init(key: SeriesIdentity) {
        self.key = key
    }

    /// Appends this interval's fields, resetting per-interval state; appends nothing when there is
    /// nothing to write (a timer or recorder without new values).
    func collect(into fields: inout [Point.Field]) {}
}

/// `FloatingPointCounter`: a cumulative float `value`.
final class FloatingCounterStorage: MetricHandler, FloatingPointCounterHandler, @unchecked Sendable {
    /// Guards the sum since start (or the last `reset()`).
    private let value = Locked<Double>(0)

    func increment(by amount: Double) {
        guard amount > 0, amount.isFinite else { return }
        value.withLock { $0 += amount }
    }

    func reset() { value.withLock { $0 = 0 } }

    override func collect(into fields: inout [Point.Field]) {
        fields.append(Point.Field(MetricsSchema.Field.value, .float(value.withLock { $0 })))
    }
}

/// `Meter`, and a `Recorder` made with `aggregate: false` (a `Gauge`): the last float `value`,
/// written every interval once set.
final class LastValueStorage: MetricHandler, MeterHandler, RecorderHandler, @unchecked Sendable {
    /// Guards the last value; `nil` until one is set.
    private let value = Locked<Double?>(nil)

    func set(_ value: Int64) { set(Double(value)) }

    func set(_ value: Double) {
        guard value.isFinite else { return }
        self.value.withLock { $0 = value }
    }

    func increment(by amount: Double) {
        guard amount.isFinite else { return }
        value.withLock { $0 = ($0 ?? 0) + amount }
    }

    func decrement(by amount: Double) { increment(by: -amount) }

    func record(_ value: Int64) { set(Double(value)) }

    func record(_ value: Double) { set(value) }

    override func collect(into fields: inout [Point.Field]) {
        guard let current = value.withLock({ $0 }), current.isFinite else { return }
        fields.append(Point.Field(MetricsSchema.Field.value, .float(current)))
    }
}

/// The bucket bounds of a timer's or recorder's histogram, in the unit values are recorded in, and the
/// field each bucket is written under (`le_<bound>` in the written unit, then `le_inf`).
struct HistogramBounds: Sendable {
    let bounds: [Double]
    let fieldNames: [String]

    /// `written` bounds (milliseconds for a timer), recorded in units `divisor` times smaller.
    init(written: [Double], divisor: Double) {
        let sorted = Array(Set(written.filter { $0.isFinite })).sorted()
        bounds = sorted.map { $0 * divisor }
        fieldNames = sorted.map { MetricsSchema.Field.bucket($0) } + [MetricsSchema.Field.bucketInfinity]
    }

    /// The bucket of `value`: the first whose bound is at or above it, else the last.
    @inline(__always)
    func index(of value: Double) -> Int { bucketIndex(of: value, in: bounds) }
}

/// Count, sum, min, max and the histogram of one interval's values, with a quantile sketch when the
/// per-instance quantiles are written.
struct Distribution: Sendable {
    var count: UInt64 = 0
    var sum = 0.0
    var minimum = Double.infinity
    var maximum = -Double.infinity
    /// Values per bucket (not cumulative).
    var buckets: [UInt64]
    var sketch: QuantileSketch?

    static let quantiles = [0.5, 0.9, 0.95, 0.99]
    static let quantileFields = [
        MetricsSchema.Field.p50, MetricsSchema.Field.p90, MetricsSchema.Field.p95, MetricsSchema.Field.p99,
    ]

    init(bucketCount: Int, quantiles: Bool) {
        buckets = Array(repeating: 0, count: bucketCount)
        sketch = quantiles ? QuantileSketch() : nil
    }

    @inline(__always)
    mutating func add(_ value: Double, bucket: Int) {
        count &+= 1
        sum += value
        if value < minimum { minimum = value }
        if value > maximum { maximum = value }
        buckets[bucket] &+= 1
        sketch?.add(value)
    }

    /// Appends count, sum, min, max, mean, the histogram (cumulative over its bounds) and, with a sketch,
    /// p50–p99, each value divided by `divisor`; then empties the distribution.
    mutating func drain(into fields: inout [Point.Field], divisor: Double, bounds: HistogramBounds) {
        guard count > 0 else { return }
        typealias F = MetricsSchema.Field
        fields.append(Point.Field(F.count, .uint(count)))
        func append(_ name: String, _ value: Double) {
            if (value / divisor).isFinite { fields.append(Point.Field(name, .float(value / divisor))) }
        }
        append(F.sum, sum)
        append(F.min, minimum)
        append(F.max, maximum)
        append(F.mean, sum / Double(count))
        var cumulative: UInt64 = 0
        for index in buckets.indices {
            cumulative &+= buckets[index]
            fields.append(Point.Field(bounds.fieldNames[index], .uint(cumulative)))
            buckets[index] = 0
        }
        if sketch != nil {
            sketch!.quantiles(Self.quantiles) { index, value in append(Self.quantileFields[index], value) }
            sketch!.reset()
        }
        count = 0
        sum = 0
        minimum = .infinity
        maximum = -.infinity
    }
}

/// `Timer` (floats in milliseconds) and an aggregating `Recorder`: per-interval count, sum, min, max,
/// mean, a histogram that replicas and intervals merge by adding, and (an option) quantiles; nothing when
/// the interval had no values.
final class DistributionStorage: MetricHandler, TimerHandler, RecorderHandler, @unchecked Sendable {
    /// Guards this interval's values (`active`) and the emptied distribution that takes over at the
    /// next collection (`spare`), so its storage is reused rather than allocated anew.
    private let state: Locked<(active: Distribution, spare: Distribution)>
    /// What a recorded value is divided by when written (1e6 turns a timer's nanoseconds into milliseconds,
    /// exactly as the agent's `duration_ms`).
    private let divisor: Double
    private let bounds: HistogramBounds

    init(key: SeriesIdentity, divisor: Double, bounds: HistogramBounds, quantiles: Bool) {
        self.divisor = divisor
        self.bounds = bounds
        let empty = Distribution(bucketCount: bounds.bounds.count + 1, quantiles: quantiles)
        self.state = Locked((active: empty, spare: empty))
        super.init(key: key)
    }

    @inline(__always)
    func recordNanoseconds(_ duration: Int64) {
        let value = Double(Swift.max(duration, 0))
        let bucket = bounds.index(of: value)
        state.withLock { $0.active.add(value, bucket: bucket) }
    }

    func record(_ value: Int64) { record(Double(value)) }

    @inline(__always)
    func record(_ value: Double) {
        guard value.isFinite else { return }
        let bucket = bounds.index(of: value)
        state.withLock { $0.active.add(value, bucket: bucket) }
    }

    override func collect(into fields: inout [Point.Field]) {
        // Swapped out under the lock, summarised outside it, so recording never waits for the quantiles.
        var drained = state.withLock { state -> Distribution? in
            guard state.active.count > 0 else { return nil }
            // Moved, not copied: the next interval's storage must be the active one's alone.
            var taken = state.spare
            state.spare = Distribution(bucketCount: 0, quantiles: false)
            swap(&taken, &state.active)
            return taken
        }
        guard drained != nil else { return }
        drained!.drain(into: &fields, divisor: divisor, bounds: bounds)
        state.withLock { state in state.spare = drained! }
    }
}

/// The calling thread's id, for picking a counter stripe.
enum ThreadID {
    @inline(__always)
    static var current: Int {
        #if canImport(Darwin)
        return Int(bitPattern: UnsafeRawPointer(pthread_self()))
        #else
        return Int(bitPattern: UInt(pthread_self()))
        #endif
    }
}

enum System {
    static let coreCount = max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1)
}
