import LineProtocol
import Testing

@testable import APIHealthRelay
@_spi(Package) import APIHealth

/// The relay's names come from ``PointSchema``: its health point's measurement, fields and their types, and
/// the reasons it counts refusals by.
@Suite struct RelaySchemaTests {
    @Test func theRefusalReasonsAreTheSchemas() {
        typealias F = PointSchema.RelayField
        #expect(Refusal.lineReasons.map(\.rawValue) == F.lineRefusalReasons)
        #expect(Refusal.allCases.map(\.rawValue) == F.lineRefusalReasons + F.writeRefusalReasons)
    }

    @Test func theHealthPointWritesTheSchemasFieldsWithTheirTypes() throws {
        var counters = RelayCounters()
        counters.refused[.fieldType] = 3
        let point = RelayHealthPoint.point(
            counters,
            clients: 2,
            clientsEvicted: 1,
            metrics: AgentMetrics(),
            tags: [Point.Tag(PointSchema.Tag.service, "apihealth-relay")],
            at: Timestamp(seconds: 1_800_000_000)
        )
        #expect(point.measurement == PointSchema.Measurement.relay)
        #expect(point.fields.map(\.key) == PointSchema.relayFields)
        let types = try #require(PointSchema.fieldTypes(of: PointSchema.Measurement.relay))
        for field in point.fields {
            guard case .uint = field.value, types[field.key] == .uint else {
                Issue.record("\(field.key) is not the schema's unsigned count")
                continue
            }
        }
        #expect(point.field(PointSchema.RelayField.refused("field_type")) == .uint(3))
        #expect(point.field(PointSchema.RelayField.linesRefused) == .uint(3))
    }

    @Test func theCheckTakesTheTypesTheSchemaGives() {
        let app = AppKeys.App(name: "shop-ios", environment: "", index: 0)
        let now = Timestamp(seconds: 1_800_000_000)
        let check = LineCheck()
        // Every field of every measurement an install writes, with a value of the schema's type, passes.
        for measurement in [
            PointSchema.Measurement.request, PointSchema.Measurement.parseFailure, PointSchema.Measurement.agent,
            PointSchema.Measurement.requestInterval,
        ] {
            for (key, type) in PointSchema.fieldTypes(of: measurement)! {
                let value: FieldValue
                switch type {
                case .float: value = .float(1.5)
                case .int: value = .int(-1)
                case .uint: value = .uint(UInt64.max)
                case .bool: value = .bool(true)
                case .string: value = .string("x")
                }
                var point = Point(
                    measurement: measurement,
                    tags: [Point.Tag(PointSchema.Tag.service, app.name)],
                    fields: [Point.Field(key, value)],
                    timestamp: now
                )
                #expect(check.check(&point, app: app, now: now) == nil, "\(measurement) \(key)")
            }
        }
        // The relay's own measurement is not an install's to write.
        var relay = Point(
            measurement: PointSchema.Measurement.relay,
            tags: [Point.Tag(PointSchema.Tag.service, app.name)],
            fields: [Point.Field(PointSchema.RelayField.requests, .uint(1))],
            timestamp: now
        )
        #expect(check.check(&relay, app: app, now: now) == .measurement)
    }
}
