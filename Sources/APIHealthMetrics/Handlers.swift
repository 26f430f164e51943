import APIHealth
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

/// Count, sum, min, max and a quantile sketch of one interval's values.
struct Distribution: Sendable {
    var sum = 0.0
    /// Count, min and max are the sketch's own.
    var sketch = QuantileSketch()

    static let quantiles = [0.5, 0.9, 0.95, 0.99]
    static let quantileFields = [
        MetricsSchema.Field.p50, MetricsSchema.Field.p90, MetricsSchema.Field.p95, MetricsSchema.Field.p99,
    ]

    var count: UInt64 { sketch.count }

    @inline(__always)
    mutating func add(_ value: Double) {
        sum += value
        sketch.add(value)
    }

    /// Appends count, sum, min, max, mean and p50–p99, each divided by `divisor`, and empties the distribution.
    mutating func drain(into fields: inout [Point.Field], divisor: Double) {
        guard count > 0 else { return }
        typealias F = MetricsSchema.Field
        fields.append(Point.Field(F.count, .uint(count)))
        func append(_ name: String, _ value: Double) {
            if (value / divisor).isFinite { fields.append(Point.Field(name, .float(value / divisor))) }
        }
        append(F.sum, sum)
        append(F.min, sketch.minimum)
        append(F.max, sketch.maximum)
        append(F.mean, sum / Double(count))
        sketch.quantiles(Self.quantiles) { index, value in append(Self.quantileFields[index], value) }
        sum = 0
        sketch.reset()
    }
}

/// `Timer` (floats in milliseconds) and an aggregating `Recorder`: per-interval count, sum, min, max,
/// mean and quantiles; nothing when the interval had no values.
final class DistributionStorage: MetricHandler, TimerHandler, RecorderHandler, @unchecked Sendable {
    /// Guards this interval's values (`active`) and the emptied distribution that takes over at the
    /// next collection (`spare`), so its bucket storage is reused rather than allocated anew.
    private let state = Locked((active: Distribution(), spare: Distribution()))
    /// What a recorded value is divided by when written (1e6 turns a timer's nanoseconds into milliseconds,
    /// exactly as the agent's `duration_ms`).
    private let divisor: Double

    init(key: SeriesIdentity, divisor: Double) {
        self.divisor = divisor
        super.init(key: key)
    }

    @inline(__always)
    func recordNanoseconds(_ duration: Int64) {
        let value = Double(Swift.max(duration, 0))
        state.withLock { $0.active.add(value) }
    }

    func record(_ value: Int64) { record(Double(value)) }

    @inline(__always)
    func record(_ value: Double) {
        guard value.isFinite else { return }
        state.withLock { $0.active.add(value) }
    }

    override func collect(into fields: inout [Point.Field]) {
        // Swapped out under the lock, summarised outside it, so recording never waits for the quantiles.
        var interval = state.withLock { state -> Distribution? in
            guard state.active.count > 0 else { return nil }
            var taken = Distribution()
            swap(&taken, &state.spare)
            swap(&taken, &state.active)
            return taken
        }
        guard var drained = interval.take() else { return }
        drained.drain(into: &fields, divisor: divisor)
        state.withLock { state in swap(&state.spare, &drained) }
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
