import Foundation
import LineProtocol
import Logging
import Testing

@_spi(Benchmarking) @testable import APIHealth

/// Objectives travel on the interval points: each endpoint's own objective, and the requests within its
/// latency threshold counted as they are recorded.
@Suite struct ObjectiveOptionsTests {
    static func agent(_ objectives: ObjectiveOptions) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "objectives")
        configuration.spool = nil
        configuration.objectives = objectives
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "objectives"))
    }

    static func sample(
        host: String = "api.example.com",
        path: String,
        milliseconds: Int64,
        status: Int = 200
    )
        -> RequestSample
    {
        RequestSample(
            method: "GET",
            url: URL(string: "https://\(host)\(path)")!,
            module: "billing",
            startedAt: Date(timeIntervalSince1970: 1_763_800_000),
            duration: .milliseconds(milliseconds),
            statusCode: status
        )
    }

    static func intervalPoints(_ agent: APIHealthAgent) -> [Point] {
        agent.recordIntervalPoints(endingAt: Timestamp(seconds: 1_763_800_010))
        return agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
    }

    static func field(_ point: Point, _ key: String) -> FieldValue? {
        point.fields.first { $0.key == key }?.value
    }

    @Test func theIntervalPointCarriesTheObjectiveAndTheRequestsWithinTheThreshold() throws {
        let agent = try Self.agent(
            ObjectiveOptions(
                default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300)))
            )
        )
        for milliseconds: Int64 in [10, 299, 300, 301, 2_000] {
            agent.record(Self.sample(path: "/invoices", milliseconds: milliseconds))
        }
        let points = Self.intervalPoints(agent)
        #expect(points.count == 1)
        let point = try #require(points.first)
        typealias F = PointSchema.IntervalField
        #expect(Self.field(point, F.count) == .int(5))
        #expect(Self.field(point, F.requestsWithinLatencyObjective) == .int(3))
        #expect(Self.field(point, F.objectiveAvailability) == .float(0.999))
        #expect(Self.field(point, F.objectiveLatency) == .float(0.99))
        #expect(Self.field(point, F.objectiveLatencyMilliseconds) == .float(300))
    }

    @Test func theFirstOverrideThatNamesAnEndpointDecidesAndOthersKeepTheDefault() throws {
        let agent = try Self.agent(
            ObjectiveOptions(
                default: .init(availability: 0.99),
                overrides: [
                    .init(host: "*.stripe.com", path: "/v1/charges", objective: .init(availability: 0.9995)),
                    .init(module: "billing", objective: .init(latency: .init(target: 0.9, threshold: .seconds(1)))),
                ]
            )
        )
        agent.record(Self.sample(host: "api.stripe.com", path: "/v1/charges", milliseconds: 5))
        agent.record(Self.sample(host: "api.example.com", path: "/invoices", milliseconds: 5))
        let points = Self.intervalPoints(agent)
        let byHost = Dictionary(
            uniqueKeysWithValues: points.map { point in
                (point.tags.first { $0.key == PointSchema.Tag.host }!.value, point)
            }
        )
        let stripe = try #require(byHost["api.stripe.com"])
        #expect(Self.field(stripe, PointSchema.IntervalField.objectiveAvailability) == .float(0.9995))
        #expect(Self.field(stripe, PointSchema.IntervalField.objectiveLatency) == nil)
        let invoices = try #require(byHost["api.example.com"])
        #expect(Self.field(invoices, PointSchema.IntervalField.objectiveAvailability) == nil)
        #expect(Self.field(invoices, PointSchema.IntervalField.objectiveLatency) == .float(0.9))
        #expect(Self.field(invoices, PointSchema.IntervalField.requestsWithinLatencyObjective) == .int(1))
    }

    @Test func withoutObjectivesNoObjectiveFieldIsWritten() throws {
        let agent = try Self.agent(ObjectiveOptions())
        agent.record(Self.sample(path: "/invoices", milliseconds: 5))
        let point = try #require(Self.intervalPoints(agent).first)
        for key in PointSchema.objectiveIntervalFields { #expect(Self.field(point, key) == nil) }
    }

    @Test(arguments: [
        ObjectiveOptions(default: .init(availability: 1)),
        ObjectiveOptions(default: .init(availability: 1.5)),
        ObjectiveOptions(default: .init(availability: 0)),
        ObjectiveOptions(default: .init(latency: .init(target: 0.99, threshold: .milliseconds(-1)))),
        ObjectiveOptions(default: .init(latency: .init(target: 1, threshold: .milliseconds(300)))),
        ObjectiveOptions(overrides: [.init(path: "invoices", objective: .init(availability: 0.9))]),
    ])
    func anObjectiveThatCannotBeMetIsAnErrorAtStart(objectives: ObjectiveOptions) {
        #expect(throws: APIHealthConfiguration.Error.self) { try Self.agent(objectives) }
    }
}
