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

    /// A middleware makes its counter again for every request, its dimensions in any order: each name
    /// finds the one live series; a destroyed series is found again through its identity (revived, its
    /// count kept), and no name finds a series once it is released.
    @Test func handlersMadeAgainByNameAreTheLiveSeries() throws {
        let (_, factory) = try Self.factory(maximumSeries: .max)
        let other = factory.makeCounter(label: "requests", dimensions: [("route", "/b")])
        do {
            let first = factory.makeCounter(label: "requests", dimensions: [("route", "/a"), ("status", "200")])
            let again = factory.makeCounter(label: "requests", dimensions: [("route", "/a"), ("status", "200")])
            let reordered = factory.makeCounter(label: "requests", dimensions: [("status", "200"), ("route", "/a")])
            #expect(again === first && reordered === first && other !== first)
            first.increment(by: 2)
            factory.destroyCounter(first)
            let revived = factory.makeCounter(label: "requests", dimensions: [("status", "200"), ("route", "/a")])
            #expect(revived === first && (revived as? CounterStorage)?.total == 2)
            factory.destroyCounter(revived)
        }
        factory.flush()
        #expect(factory.seriesCount == 1, "the destroyed series is released once nobody holds it")
        let remade = factory.makeCounter(label: "requests", dimensions: [("route", "/a"), ("status", "200")])
        #expect(factory.seriesCount == 2)
        #expect((remade as? CounterStorage)?.total == 0, "a released series starts again")
    }

    /// Thousands of names, made again in another order and interleaved with names of another kind:
    /// each finds the handler it was made with, and a destroyed one is not found by its name once it is
    /// released.
    @Test func namesMadeAgainFindTheirOwnSeries() throws {
        let (_, factory) = try Self.factory(maximumSeries: .max)
        let routes = (0..<3_000).map { "/route/\($0)" }
        var made: [String: any CounterHandler] = [:]
        for route in routes { made[route] = factory.makeCounter(label: "requests", dimensions: [("route", route)]) }
        for route in routes.reversed() + routes.shuffled() {
            let again = factory.makeCounter(label: "requests", dimensions: [("route", route)])
            #expect(again === made[route]!, "\(route)")
            let timer = factory.makeTimer(label: "requests", dimensions: [("route", route)])
            #expect(timer !== again)
        }
        do {
            let first = made.removeValue(forKey: "/route/7")!
            // Found again just before it is destroyed.
            #expect(factory.makeCounter(label: "requests", dimensions: [("route", "/route/7")]) === first)
            first.increment(by: 3)
            factory.destroyCounter(first)
        }
        factory.flush()
        let remade = factory.makeCounter(label: "requests", dimensions: [("route", "/route/7")])
        #expect((remade as? CounterStorage)?.total == 0, "a released series is not found by its name")
    }
}
