#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Quantiles of a stream of values in bounded memory: exact up to ``exactLimit`` values, then log buckets
/// (DDSketch) whose answers are within ``relativeAccuracy`` of the exact ones. The package's one sketch:
/// the metrics backend's timers and `influx-tail --summary` both use it, with the same rank rule.
///
/// ```swift
/// var sketch = QuantileSketch(exactLimit: 100)
/// for value in [12.0, 15, 11, 400] { sketch.add(value) }
/// sketch.quantile(0.95)  // 400.0 (nearest rank: the 4th of 4)
/// ```
///
/// **Rank rule: nearest rank.** The quantile `q` of `n` values is the value at rank `⌈q · n⌉` (1-based,
/// at least 1) of the values in ascending order: the smallest value with at least `q` of all values at or
/// below it. Past ``exactLimit`` a value `x ≠ 0` goes to bucket `⌈log|x| / log γ⌉` with
/// `γ = (1 + a) / (1 − a)`, `a` = 0.9 × ``relativeAccuracy`` (room for rounding in `log` at bucket edges);
/// the bucket's estimate `2γⁱ / (γ + 1)` is within `a` of every value in it. Answers are clamped to the
/// exact ``minimum`` and ``maximum``. Buckets are dense between the lowest and highest index seen, at
/// most ``maximumBuckets`` per sign (at 1 %, 2,048 × 8 bytes span 1 ns to 118 days); beyond that the
/// lowest buckets are merged, so only the lowest quantiles of a wider range lose accuracy. Zero is
/// counted apart; storage is kept across ``reset()``.
package struct QuantileSketch: Sendable {
    /// Every quantile past ``exactLimit`` is within this fraction of the exact one.
    package let relativeAccuracy: Double
    /// How many values are kept as they are (answers exact) before the sketch turns to buckets.
    package let exactLimit: Int
    /// The ratio of one bucket's upper bound to its lower bound.
    package let gamma: Double
    private let multiplier: Double

    package static let defaultRelativeAccuracy = 0.01
    package static let maximumBuckets = 2_048
    /// Magnitudes below this count as zero.
    static let smallestMagnitude = 1e-300

    /// The values while there are at most ``exactLimit``; `nil` once they went to the buckets.
    private var exact: [Double]?
    private var positive = LogBuckets()
    private var negative = LogBuckets()
    private var zeros: UInt64 = 0
    /// How many values were added since the last reset.
    package private(set) var count: UInt64 = 0
    package private(set) var minimum = Double.infinity
    package private(set) var maximum = -Double.infinity

    /// - Parameters:
    ///   - relativeAccuracy: The bound on the error of every answer once the values are bucketed.
    ///   - exactLimit: Values kept exactly before bucketing (0: bucket from the first value).
    package init(relativeAccuracy: Double = Self.defaultRelativeAccuracy, exactLimit: Int = 0) {
        self.relativeAccuracy = relativeAccuracy
        self.exactLimit = max(exactLimit, 0)
        let bucketAccuracy = relativeAccuracy * 0.9
        gamma = (1 + bucketAccuracy) / (1 - bucketAccuracy)
        multiplier = 1 / log(gamma)
        exact = exactLimit > 0 ? [] : nil
    }

    /// Whether every answer is exact (no more than ``exactLimit`` values so far).
    package var isExact: Bool { exact != nil }

    /// Adds `value`; a value that is not finite is left out.
    @inline(__always)
    package mutating func add(_ value: Double) {
        guard value.isFinite else { return }
        count &+= 1
        if value < minimum { minimum = value }
        if value > maximum { maximum = value }
        if exact != nil {
            exact!.append(value)
            if exact!.count > exactLimit { bucketExactValues() }
            return
        }
        addToBuckets(value, count: 1)
    }

    /// Adds every value of `other` (bucketed at this sketch's accuracy when either is past its limit).
    package mutating func merge(_ other: QuantileSketch) {
        if let values = other.exact {
            for value in values { add(value) }
            return
        }
        guard other.count > 0 else { return }
        if exact != nil { bucketExactValues() }
        let sameBuckets = other.gamma == gamma
        other.negative.forEachBucket(descending: false) { index, count in
            if sameBuckets {
                negative.add(index: index, count: count)
            } else {
                addToBuckets(-other.bucketValue(index), count: count)
            }
        }
        other.positive.forEachBucket(descending: false) { index, count in
            if sameBuckets {
                positive.add(index: index, count: count)
            } else {
                addToBuckets(other.bucketValue(index), count: count)
            }
        }
        zeros &+= other.zeros
        count &+= other.count
        minimum = Swift.min(minimum, other.minimum)
        maximum = Swift.max(maximum, other.maximum)
    }

    /// The nearest rank (1-based) of quantile `q` among `count` values: `⌈q · count⌉`, at least 1.
    package static func rank(_ q: Double, count: UInt64) -> UInt64 {
        guard count > 0 else { return 0 }
        let exactRank = Swift.min(Swift.max(q, 0), 1) * Double(count)
        // A product a rounding above a whole number (0.07 × 100 = 7.000000000000001) is that number.
        let rank = UInt64((exactRank - exactRank.ulp * 4).rounded(.up))
        return Swift.min(Swift.max(rank, 1), count)
    }

    /// The value at the nearest rank of `q` (see ``rank(_:count:)``); `nil` when empty.
    package func quantile(_ q: Double) -> Double? {
        var result: Double?
        quantiles([q]) { _, value in result = value }
        return result
    }

    /// Calls `body(i, value)` with the value of each of the `ascending` quantiles (as ``quantile(_:)``),
    /// in one pass (one sort while exact); nothing when the sketch is empty.
    package func quantiles(_ ascending: [Double], _ body: (Int, Double) -> Void) {
        let n = count
        guard n > 0 else { return }
        if let exact {
            let sorted = exact.sorted()
            for (index, q) in ascending.enumerated() { body(index, sorted[Int(Self.rank(q, count: n)) - 1]) }
            return
        }
        var next = 0
        var seen: UInt64 = 0
        let (low, high) = (minimum, maximum)
        func emit(_ value: @autoclosure () -> Double) {
            while next < ascending.count, Self.rank(ascending[next], count: n) <= seen {
                body(next, Swift.min(Swift.max(value(), low), high))
                next += 1
            }
        }
        // Negative values, most negative first; then zeros; then positive values.
        negative.forEachBucket(descending: true) { index, count in
            seen &+= count
            emit(-bucketValue(index))
        }
        seen &+= zeros
        emit(0)
        positive.forEachBucket(descending: false) { index, count in
            seen &+= count
            emit(bucketValue(index))
        }
    }

    /// Empties the sketch, keeping its storage (and exact again, when it has an ``exactLimit``).
    package mutating func reset() {
        positive.reset()
        negative.reset()
        zeros = 0
        count = 0
        minimum = .infinity
        maximum = -.infinity
        if exactLimit > 0 {
            if exact == nil { exact = [] } else { exact!.removeAll(keepingCapacity: true) }
        }
    }

    /// The bucket of a magnitude above ``smallestMagnitude``.
    @inline(__always)
    package func bucketIndex(_ magnitude: Double) -> Int {
        Int((log(magnitude) * multiplier).rounded(.up))
    }

    /// The estimate for every value in bucket `index`.
    package func bucketValue(_ index: Int) -> Double {
        2 * pow(gamma, Double(index)) / (gamma + 1)
    }

    @inline(__always)
    private mutating func addToBuckets(_ value: Double, count: UInt64) {
        if value > Self.smallestMagnitude {
            positive.add(index: bucketIndex(value), count: count)
        } else if value < -Self.smallestMagnitude {
            negative.add(index: bucketIndex(-value), count: count)
        } else {
            zeros &+= count
        }
    }

    private mutating func bucketExactValues() {
        guard let values = exact else { return }
        exact = nil
        for value in values { addToBuckets(value, count: 1) }
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
    mutating func add(index: Int, count: UInt64) {
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
        counts[index - offset] &+= count
        total &+= count
    }

    /// Makes room for `index` (up to the bucket cap, merging the lowest buckets); returns where to count it.
    private mutating func grow(toInclude index: Int) -> Int {
        let newLow = min(low, index)
        let newHigh = max(high, index)
        let cap = QuantileSketch.maximumBuckets
        if newHigh - newLow + 1 > cap {
            // Keep the highest `cap` buckets; everything below goes to the lowest kept bucket.
            let keptLow = newHigh - cap + 1
            var merged: UInt64 = 0
            var fresh = [UInt64](repeating: 0, count: cap)
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
        let start = index < low ? max(newLow - slack, newHigh - cap + 1) : newLow
        let end = index > high ? min(newHigh + slack, start + cap - 1) : newHigh
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
