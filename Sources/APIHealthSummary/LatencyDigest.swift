import Foundation

/// Durations of one endpoint, for nearest-rank percentiles: exact up to `exactLimit` values, then a
/// log-bucketed sketch whose answers are within `relativeError` of the exact ones.
///
/// ```swift
/// var digest = LatencyDigest()
/// for value in [12.0, 15, 11, 400] { digest.add(value) }
/// digest.percentile(95)  // 400.0 (nearest rank: the 4th of 4)
/// ```
///
/// Memory stays bounded whatever the number of values: at most `exactLimit` doubles, or one counter per
/// bucket of the sketch.
public struct LatencyDigest: Sendable {
    /// How many values are kept exactly before the digest turns into a sketch.
    public let exactLimit: Int
    /// The sketch's bucket ratio minus one: answers past `exactLimit` are within this relative error.
    public let relativeError: Double
    private var exact: [Double] = []
    private var buckets: [UInt32] = []
    /// Values at or below zero (the sketch's buckets are logarithmic).
    private var nonPositive = 0
    public private(set) var count = 0
    public private(set) var minimum = Double.infinity
    public private(set) var maximum = -Double.infinity

    /// Values between `smallest` and `largest` milliseconds fall into the sketch's buckets; others are
    /// clamped to its first or last bucket (and min/max stay exact).
    private static let smallest = 0.001
    private static let largest = 1e8

    public init(exactLimit: Int = 10_000, relativeError: Double = 0.01) {
        self.exactLimit = exactLimit
        self.relativeError = relativeError
    }

    /// Whether percentiles are exact (no more than `exactLimit` values so far).
    public var isExact: Bool { buckets.isEmpty }

    public mutating func add(_ value: Double) {
        guard value.isFinite else { return }
        count += 1
        minimum = Swift.min(minimum, value)
        maximum = Swift.max(maximum, value)
        if buckets.isEmpty {
            exact.append(value)
            if exact.count > exactLimit { becomeSketch() }
        } else {
            addToSketch(value)
        }
    }

    /// Adds every value of `other`.
    public mutating func merge(_ other: LatencyDigest) {
        if other.isExact {
            for value in other.exact { add(value) }
            return
        }
        if isExact { becomeSketch() }
        if buckets.count == other.buckets.count {
            for index in other.buckets.indices { buckets[index] &+= other.buckets[index] }
        } else {
            // Sketches of another resolution: each of its buckets counted at its middle value.
            for index in other.buckets.indices where other.buckets[index] > 0 {
                let value = other.bucketValue(index)
                for _ in 0..<other.buckets[index] { addToSketch(value) }
            }
        }
        nonPositive += other.nonPositive
        count += other.count
        minimum = Swift.min(minimum, other.minimum)
        maximum = Swift.max(maximum, other.maximum)
    }

    /// The nearest-rank percentile: the smallest value with at least `p` % of all values at or below it
    /// (rank ⌈p/100 × n⌉ of the sorted values). `nil` with no values.
    public func percentile(_ p: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = Swift.max(1, Swift.min(count, Int((p / 100 * Double(count)).rounded(.up))))
        if isExact {
            return exact.sorted()[rank - 1]
        }
        var seen = nonPositive
        if rank <= seen { return minimum }
        for index in buckets.indices {
            seen += Int(buckets[index])
            if seen >= rank { return Swift.min(Swift.max(bucketValue(index), minimum), maximum) }
        }
        return maximum
    }

    /// Several nearest-rank percentiles at once (one sort for the exact values).
    public func percentiles(_ ps: [Double]) -> [Double?] {
        guard count > 0 else { return ps.map { _ in nil } }
        guard isExact else { return ps.map { percentile($0) } }
        let sorted = exact.sorted()
        return ps.map { p in
            sorted[Swift.max(1, Swift.min(count, Int((p / 100 * Double(count)).rounded(.up)))) - 1]
        }
    }

    private static func bucketCount(_ relativeError: Double) -> Int {
        Int((log(largest / smallest) / log1p(2 * relativeError)).rounded(.up)) + 1
    }

    private var logRatio: Double { log1p(2 * relativeError) }

    private mutating func becomeSketch() {
        buckets = [UInt32](repeating: 0, count: Self.bucketCount(relativeError))
        for value in exact { addToSketch(value) }
        exact = []
    }

    private mutating func addToSketch(_ value: Double) {
        guard value > 0 else {
            nonPositive += 1
            return
        }
        let clamped = Swift.min(Swift.max(value, Self.smallest), Self.largest)
        let index = Swift.min(buckets.count - 1, Int(log(clamped / Self.smallest) / logRatio))
        buckets[index] &+= 1
    }

    /// The middle of bucket `index` (geometrically): within `relativeError` of every value in it.
    private func bucketValue(_ index: Int) -> Double {
        Self.smallest * exp((Double(index) + 0.5) * logRatio)
    }
}
