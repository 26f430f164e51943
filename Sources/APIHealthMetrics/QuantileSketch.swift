#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A bounded-memory quantile sketch with a relative error guarantee (DDSketch-style log buckets).
///
/// ```swift
/// var sketch = QuantileSketch()
/// for value in [1.0, 2.0, 3.0] { sketch.add(value) }
/// sketch.quantile(0.5)  // within 1 % of 2.0
/// ```
///
/// A value `x > 0` goes to bucket `ceil(log(x) / log(γ))` with `γ = (1 + a) / (1 − a)`; a bucket's
/// estimate `2γⁱ / (γ + 1)` is within `a` of every value in it, so the quantile at rank `⌊q · (n − 1)⌋`
/// of the values added is returned within ``relativeAccuracy`` of the exact one. The buckets are dense
/// between the lowest and highest index seen, at most ``maximumBuckets`` (2,048 × 8 bytes, which spans
/// 1 ns to 118 days); beyond that the lowest buckets are merged, so only the lowest quantiles of a wider
/// range lose accuracy. Negative values have their own buckets; zero (and magnitudes below 1e-300) is counted
/// apart. Storage is kept across ``reset()``, so a sketch that is refilled allocates only when its range grows.
struct QuantileSketch: Sendable {
    /// The stated bound: every quantile is within 1 % of the exact one (buckets are built for 0.9 %,
    /// leaving room for rounding in `log` at bucket edges).
    static let relativeAccuracy = 0.01
    static let bucketAccuracy = 0.009
    static let gamma = (1 + bucketAccuracy) / (1 - bucketAccuracy)
    static let multiplier = 1 / log(gamma)
    static let maximumBuckets = 2_048
    static let smallestMagnitude = 1e-300

    private var positive = LogBuckets()
    private var negative = LogBuckets()
    private var zeros: UInt64 = 0

    /// How many values were added since the last reset.
    var count: UInt64 { positive.total + negative.total + zeros }

    @inline(__always)
    mutating func add(_ value: Double) {
        if value > Self.smallestMagnitude {
            positive.add(index: Self.index(value))
        } else if value < -Self.smallestMagnitude {
            negative.add(index: Self.index(-value))
        } else {
            zeros &+= 1
        }
    }

    @inline(__always)
    static func index(_ magnitude: Double) -> Int {
        Int((log(magnitude) * multiplier).rounded(.up))
    }

    /// The estimate for every value in bucket `index`.
    static func value(ofBucket index: Int) -> Double {
        2 * pow(gamma, Double(index)) / (gamma + 1)
    }

    /// The value at rank `⌊q · (n − 1)⌋` (0-based, ascending), within ``relativeAccuracy``; `nil` when empty.
    func quantile(_ q: Double) -> Double? {
        var result: Double?
        quantiles([q]) { _, value in result = value }
        return result
    }

    /// Calls `body(i, value)` with the value at each of `ascending` quantiles (as ``quantile(_:)``), in
    /// one pass over the buckets; nothing when the sketch is empty.
    func quantiles(_ ascending: [Double], _ body: (Int, Double) -> Void) {
        let n = count
        guard n > 0 else { return }
        var next = 0
        var seen: UInt64 = 0
        func emit(through seen: UInt64, _ value: @autoclosure () -> Double) {
            while next < ascending.count,
                UInt64((min(max(ascending[next], 0), 1) * Double(n - 1)).rounded(.down)) < seen
            {
                body(next, value())
                next += 1
            }
        }
        // Negative values, most negative first; then zeros; then positive values.
        negative.forEachBucket(descending: true) { index, count in
            seen &+= count
            emit(through: seen, -Self.value(ofBucket: index))
        }
        seen &+= zeros
        emit(through: seen, 0)
        positive.forEachBucket(descending: false) { index, count in
            seen &+= count
            emit(through: seen, Self.value(ofBucket: index))
        }
    }

    /// Empties the sketch, keeping its storage.
    mutating func reset() {
        positive.reset()
        negative.reset()
        zeros = 0
    }
}

/// Counts per log bucket, dense from `offset`, allocated on first use and kept across resets.
private struct LogBuckets: Sendable {
    private var counts: [UInt64] = []
    /// The bucket index of `counts[0]`.
    private var offset = 0
    /// The lowest and highest index used since the last reset (valid when `total > 0`).
    private var low = 0
    private var high = 0
    private(set) var total: UInt64 = 0

    @inline(__always)
    mutating func add(index: Int) {
        var index = index
        if total == 0 {
            if counts.isEmpty { counts = Array(repeating: 0, count: 256) }
            // Centre the kept storage on the first value of the interval: no allocation.
            offset = index - counts.count / 2
            low = index
            high = index
        } else if index < low || index > high {
            if index - offset < 0 || index - offset >= counts.count { index = grow(toInclude: index) }
            low = min(low, index)
            high = max(high, index)
        }
        counts[index - offset] &+= 1
        total &+= 1
    }

    /// Makes room for `index` (up to the bucket cap, merging the lowest buckets); returns where to count it.
    private mutating func grow(toInclude index: Int) -> Int {
        let newLow = min(low, index)
        let newHigh = max(high, index)
        if newHigh - newLow + 1 > QuantileSketch.maximumBuckets {
            // Keep the highest `maximumBuckets`; everything below goes to the lowest kept bucket.
            let keptLow = newHigh - QuantileSketch.maximumBuckets + 1
            var merged: UInt64 = 0
            var fresh = [UInt64](repeating: 0, count: QuantileSketch.maximumBuckets)
            for i in low...high where counts[i - offset] > 0 {
                if i < keptLow { merged &+= counts[i - offset] } else { fresh[i - keptLow] = counts[i - offset] }
            }
            fresh[0] &+= merged
            counts = fresh
            offset = keptLow
            low = max(low, keptLow)
            return max(index, keptLow)
        }
        // Room with slack on the growing side, so a slowly widening range reallocates rarely.
        let slack = 64
        let start = index < low ? max(newLow - slack, newHigh - QuantileSketch.maximumBuckets + 1) : newLow
        let end = index > high ? min(newHigh + slack, start + QuantileSketch.maximumBuckets - 1) : newHigh
        var fresh = [UInt64](repeating: 0, count: max(end - start + 1, counts.count))
        for i in low...high { fresh[i - start] = counts[i - offset] }
        counts = fresh
        offset = start
        return index
    }

    /// Calls `body(index, count)` for every non-empty bucket, lowest first (or highest first).
    func forEachBucket(descending: Bool, _ body: (Int, UInt64) -> Void) {
        guard total > 0 else { return }
        if descending {
            for i in stride(from: high, through: low, by: -1) where counts[i - offset] > 0 {
                body(i, counts[i - offset])
            }
        } else {
            for i in low...high where counts[i - offset] > 0 { body(i, counts[i - offset]) }
        }
    }

    mutating func reset() {
        guard total > 0 else { return }
        for i in low...high { counts[i - offset] = 0 }
        total = 0
    }
}
