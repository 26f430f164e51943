import CoreMetrics
import Foundation
import Logging
import TestSupport
import Testing

@testable import APIHealth
@testable import APIHealthMetrics

@Suite struct QuantileSketchTests {
    static func exact(_ sorted: [Double], _ q: Double) -> Double {
        sorted[Int((q * Double(sorted.count - 1)).rounded(.down))]
    }

    static let quantiles = [0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]

    @Test func aMillionLogNormalSamplesGiveEveryQuantileWithinOnePercent() {
        var random = SplitMix64(seed: 7)
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
            #expect(abs(estimate - exact) / exact <= QuantileSketch.relativeAccuracy, "q=\(q): \(estimate) vs \(exact)")
        }
    }

    @Test func theErrorBoundHoldsFromOneNanosecondToOneHour() {
        // Log-uniform over 1 ns – 1 h, and each end on its own.
        var random = SplitMix64(seed: 11)
        var samples = (0..<200_000).map { _ in exp(Double.random(in: 0...log(3.6e12), using: &random)) }
        samples += [1, 1, 3.6e12, 3.6e12]
        var sketch = QuantileSketch()
        for value in samples { sketch.add(value) }
        samples.sort()
        for q in Self.quantiles {
            let exact = Self.exact(samples, q)
            #expect(abs(sketch.quantile(q)! - exact) / exact <= QuantileSketch.relativeAccuracy, "q=\(q)")
        }
        // Every bucket edge in the range, with values just either side of it.
        for index in QuantileSketch.index(1)...QuantileSketch.index(3.6e12) {
            let edge = pow(QuantileSketch.gamma, Double(index))
            for value in [edge.nextDown, edge, edge.nextUp] {
                let estimate = QuantileSketch.value(ofBucket: QuantileSketch.index(value))
                #expect(abs(estimate - value) / value <= QuantileSketch.relativeAccuracy)
            }
        }
    }

    @Test func negativeValuesAndZerosAreOrdered() {
        var sketch = QuantileSketch()
        let values: [Double] = [-100, -10, -1, 0, 0, 1, 10, 100, 1_000]
        for value in values { sketch.add(value) }
        for (rank, value) in values.enumerated() {
            let estimate = sketch.quantile(Double(rank) / Double(values.count - 1))!
            #expect(abs(estimate - value) <= abs(value) * QuantileSketch.relativeAccuracy, "rank \(rank)")
        }
    }

    @Test func aRangeWiderThanTheBucketCapKeepsTheHighQuantiles() {
        var sketch = QuantileSketch()
        for exponent in -300...300 { sketch.add(pow(10, Double(exponent))) }
        #expect(abs(sketch.quantile(1)! - 1e300) / 1e300 <= QuantileSketch.relativeAccuracy)
        #expect(abs(sketch.quantile(0.99)! - 1e294) / 1e294 <= QuantileSketch.relativeAccuracy)
        sketch.reset()
        #expect(sketch.quantile(0.5) == nil)
        sketch.add(42)
        #expect(abs(sketch.quantile(0.5)! - 42) <= 42 * QuantileSketch.relativeAccuracy)
    }
}

@Suite struct MetricsRegistryTests {
    static func factory(maximumSeries: Int = 10_000) throws -> (APIHealthAgent, APIHealthMetricsFactory) {
        var configuration = APIHealthConfiguration(serviceName: "registry", destination: nil)
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "registry"))
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)
        options.maximumSeries = maximumSeries
        return (agent, APIHealthMetricsFactory(agent: agent, configuration: options))
    }

    @Test func aDestroyedHandlerIsReleasedOnceNoOneHoldsItAfterItsLastValueIsWritten() throws {
        let (agent, factory) = try Self.factory()
        var counter: Counter? = Counter(label: "gone", dimensions: [("a", "b")], factory: factory)
        counter?.increment(by: 5)
        counter?.destroy()
        #expect(factory.seriesCount == 1, "kept while someone may still increment it")
        factory.flush()
        #expect(factory.seriesCount == 1, "still held")
        counter?.increment(by: 1)
        counter = nil
        factory.flush()
        #expect(factory.seriesCount == 0)
        let counts = agent.pendingPoints().filter { $0.measurement == "gone" }.compactMap { $0.field("count") }
        #expect(counts == [.uint(5), .uint(6)], "its last value was written before release")
    }

    @Test func makingADestroyedSeriesAgainBeforeReleaseKeepsItsCount() throws {
        let (_, factory) = try Self.factory()
        let first = factory.makeCounter(label: "again", dimensions: [])
        first.increment(by: 3)
        factory.destroyCounter(first)
        let second = factory.makeCounter(label: "again", dimensions: [])
        second.increment(by: 4)
        #expect(second === first && (second as? CounterStorage)?.total == 7)
        #expect(factory.seriesCount == 1)
    }

    @Test func theOverflowSeriesIsNotDestroyedAndDoesNotCountTowardsTheCap() throws {
        let (agent, factory) = try Self.factory(maximumSeries: 1)
        do {
            let kept = Counter(label: "kept", dimensions: [], factory: factory)
            let extra = Counter(label: "extra", dimensions: [], factory: factory)
            extra.increment()
            extra.destroy()
            #expect(factory.seriesCount == 1 && agent.metrics.metricsOverflowed == 1)
            kept.destroy()
        }
        factory.flush()
        #expect(factory.seriesCount == 0)
        Counter(label: "fits", dimensions: [], factory: factory).increment()
        #expect(agent.metrics.metricsOverflowed == 1)
    }
}
