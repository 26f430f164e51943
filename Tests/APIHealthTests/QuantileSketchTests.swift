import Foundation
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

@Suite struct QuantileSketchTests {
    /// The nearest-rank quantile: the value at rank ⌈q · n⌉ (1-based) of `sorted`.
    static func exact(_ sorted: [Double], _ q: Double) -> Double {
        sorted[max(Int((q * Double(sorted.count)).rounded(.up)), 1) - 1]
    }

    static let quantiles = [0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]
    static let accuracy = QuantileSketch.defaultRelativeAccuracy

    @Test func nearestRankIsExactUpToTheLimit() {
        var sketch = QuantileSketch(exactLimit: 100)
        for value in (1...100).reversed() { sketch.add(Double(value)) }
        #expect(sketch.isExact)
        #expect(sketch.quantile(0.5) == 50)
        #expect(sketch.quantile(0.95) == 95)
        #expect(sketch.quantile(0.99) == 99)
        #expect(sketch.quantile(1) == 100)
        #expect(sketch.quantile(0.07) == 7, "0.07 × 100 is 7, not the rounding above it")
        var small = QuantileSketch(exactLimit: 100)
        for value in [5.0, 7, 9, 200] { small.add(value) }
        var answers: [Double] = []
        small.quantiles([0.5, 0.95, 0.99]) { _, value in answers.append(value) }
        #expect(answers == [7, 200, 200])
    }

    @Test func theExactAndTheBucketedAnswersFollowTheSameRank() {
        // Values far enough apart that each is its own bucket: both modes must pick the same value.
        let values = (1...40).map { pow(1.5, Double($0)) }
        var exact = QuantileSketch(exactLimit: 1_000)
        var bucketed = QuantileSketch()
        for value in values.reversed() {
            exact.add(value)
            bucketed.add(value)
        }
        for q in Self.quantiles {
            let expected = Self.exact(values, q)
            #expect(exact.quantile(q) == expected, "q=\(q)")
            #expect(abs(bucketed.quantile(q)! - expected) <= expected * Self.accuracy, "q=\(q)")
        }
    }

    @Test func aMillionLogNormalSamplesGiveEveryQuantileWithinOnePercent() {
        var random = SeededGenerator(state: 7)
        var sketch = QuantileSketch()
        var samples: [Double] = []
        samples.reserveCapacity(1_000_000)
        for _ in 0..<1_000_000 {
            let value = exp(log(2e6) + 1.5 * random.nextGaussian()).rounded()  // nanoseconds around 2 ms
            samples.append(value)
            sketch.add(value)
        }
        samples.sort()
        for q in Self.quantiles {
            let exact = Self.exact(samples, q)
            let estimate = sketch.quantile(q)!
            #expect(abs(estimate - exact) / exact <= Self.accuracy, "q=\(q): \(estimate) vs \(exact)")
        }
    }

    @Test func theErrorBoundHoldsFromOneNanosecondToOneHour() {
        // Log-uniform over 1 ns – 1 h, and each end on its own.
        var random = SeededGenerator(state: 11)
        var samples = (0..<200_000).map { _ in exp(Double.random(in: 0...log(3.6e12), using: &random)) }
        samples += [1, 1, 3.6e12, 3.6e12]
        var sketch = QuantileSketch()
        for value in samples { sketch.add(value) }
        samples.sort()
        for q in Self.quantiles {
            let exact = Self.exact(samples, q)
            #expect(abs(sketch.quantile(q)! - exact) / exact <= Self.accuracy, "q=\(q)")
        }
        // Every bucket edge in the range, with values just either side of it.
        for index in sketch.bucketIndex(1)...sketch.bucketIndex(3.6e12) {
            let edge = pow(sketch.gamma, Double(index))
            for value in [edge.nextDown, edge, edge.nextUp] {
                let estimate = sketch.bucketValue(sketch.bucketIndex(value))
                #expect(abs(estimate - value) / value <= Self.accuracy)
            }
        }
    }

    @Test func pastTheLimitTheAnswersStayWithinTheAccuracy() {
        var sketch = QuantileSketch(exactLimit: 1_000)
        var random = SeededGenerator(state: 42)
        let values = (0..<200_000).map { _ in Double.random(in: 0.5..<2_000.5, using: &random) }
        for value in values { sketch.add(value) }
        #expect(!sketch.isExact)
        let sorted = values.sorted()
        for q in [0.5, 0.95, 0.99, 0.999] {
            let exact = Self.exact(sorted, q)
            let estimate = sketch.quantile(q)!
            #expect(abs(estimate - exact) / exact <= Self.accuracy, "q=\(q): \(estimate) vs \(exact)")
        }
    }

    @Test func negativeValuesAndZerosAreOrdered() {
        var sketch = QuantileSketch()
        let values: [Double] = [-100, -10, -1, 0, 0, 1, 10, 100, 1_000]
        for value in values { sketch.add(value) }
        for (rank, value) in values.enumerated() {
            let estimate = sketch.quantile(Double(rank + 1) / Double(values.count))!
            #expect(abs(estimate - value) <= abs(value) * Self.accuracy, "rank \(rank + 1)")
        }
    }

    @Test func aRangeWiderThanTheBucketCapKeepsTheHighQuantiles() {
        var sketch = QuantileSketch()
        for exponent in -300...300 { sketch.add(pow(10, Double(exponent))) }
        #expect(abs(sketch.quantile(1)! - 1e300) / 1e300 <= Self.accuracy)
        #expect(abs(sketch.quantile(0.99)! - 1e294) / 1e294 <= Self.accuracy)
        sketch.reset()
        #expect(sketch.quantile(0.5) == nil)
        sketch.add(42)
        #expect(abs(sketch.quantile(0.5)! - 42) <= 42 * Self.accuracy)
    }

    @Test func mergingGivesTheAnswersOfOneSketchOfEveryValue() {
        var random = SeededGenerator(state: 3)
        let values = (0..<50_000).map { _ in exp(Double.random(in: 0...12, using: &random)) }
        var whole = QuantileSketch()
        var coarse = QuantileSketch(relativeAccuracy: 0.05, exactLimit: 64)
        var parts = [QuantileSketch(), QuantileSketch(exactLimit: 10), QuantileSketch(relativeAccuracy: 0.02)]
        for (index, value) in values.enumerated() {
            whole.add(value)
            parts[index % parts.count].add(value)
        }
        var merged = QuantileSketch()
        for part in parts {
            merged.merge(part)
            coarse.merge(part)
        }
        #expect(merged.count == whole.count && merged.minimum == whole.minimum && merged.maximum == whole.maximum)
        let sorted = values.sorted()
        for q in Self.quantiles {
            let exact = Self.exact(sorted, q)
            // Re-bucketed parts (other accuracies) may add their own bucket's error to this one's.
            #expect(abs(merged.quantile(q)! - exact) / exact <= 0.02 + Self.accuracy + 1e-9, "q=\(q)")
            #expect(abs(coarse.quantile(q)! - exact) / exact <= 0.05 + 0.02 + 1e-9, "q=\(q)")
        }
    }
}
