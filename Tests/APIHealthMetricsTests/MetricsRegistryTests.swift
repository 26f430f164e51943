import CoreMetrics
import Foundation
import Logging
import TestSupport
import Testing

@testable import APIHealth
@testable import APIHealthMetrics

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
