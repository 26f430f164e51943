import APIHealth
import Foundation
import LineProtocol
import TestSupport
import Testing

/// The hard cases of line protocol, written with the encoder to a real InfluxDB 1.x and read back.
@Suite struct LineProtocolConformanceTests {
    static let longString = String(repeating: "x", count: LineEncoder.maximumStringBytes)

    /// Each case: the point to write, and the measurement, tags and fields InfluxDB must hold after.
    struct Case {
        var point: Point
        var expected: Point
    }

    static func corpus(at base: Int64) -> [Case] {
        var cases: [Case] = []
        func add(_ measurement: String, tags: [Point.Tag] = [], fields: [Point.Field], expected: Point? = nil) {
            let timestamp = Timestamp(nanosecondsSinceEpoch: base + Int64(cases.count))
            let point = Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp)
            guard case .point(var modelled) = LineProtocolModel.expected(point, precision: .ns) else {
                fatalError("corpus point \(point) is not writable")
            }
            modelled.timestamp = timestamp
            var want = expected ?? modelled
            want.timestamp = timestamp
            cases.append(Case(point: point, expected: want))
        }
        let awkward = [
            ",", "=", " ", "\"", "\\", "'", "#", "é", "日本", "🚀", "{id}", "a\\b", "a\\ b", "a\\,b", "a\\=b", "a\\\\b",
        ]
        for (index, text) in awkward.enumerated() {
            add(
                "c\(index)" + text + "m",
                tags: [Point.Tag("k" + text, "v" + text)],
                fields: [Point.Field("f" + text, .string("s" + text))]
            )
            add(
                "c\(index)" + text + "tail",
                tags: [Point.Tag("k", text + "end")],
                fields: [Point.Field("f", .int(Int64(index)))]
            )
        }
        add("space in measurement", tags: [Point.Tag("tag key", "tag value")], fields: [Point.Field("field key", 1.5)])
        add(
            "trailing\\",
            tags: [Point.Tag("k\\", "v\\\\")],
            fields: [Point.Field("f\\", .string("s\\"))],
            expected: Point(
                measurement: "trailing",
                tags: [Point.Tag("k", "v")],
                fields: [Point.Field("f", .string("s\\"))]
            )
        )
        add(
            "control",
            tags: [Point.Tag("k", "a\tb\nc")],
            fields: [Point.Field("f\r", .string("line one\nline two\r\n\t"))],
            expected: Point(
                measurement: "control",
                tags: [Point.Tag("k", "a\tb\u{FFFD}c")],
                fields: [Point.Field("f\u{FFFD}", .string("line one\u{FFFD}line two\u{FFFD}\u{FFFD}\t"))]
            )
        )
        add(
            "strings",
            fields: [
                Point.Field("empty", .string("")), Point.Field("quotes", .string("\"\"")),
                Point.Field("slashes", .string("\\\\\\")),
                Point.Field("trailing", .string("ends with \\")), Point.Field("unicode", .string("naïve ☕️ 日本語 🚀")),
                Point.Field("long", .string(longString)),
            ]
        )
        let tooLong = String(repeating: "ab", count: 40_000)
        add(
            "truncated",
            fields: [Point.Field("s", .string(tooLong))],
            expected: Point(
                measurement: "truncated",
                fields: [Point.Field("s", .string(String(tooLong.prefix(LineEncoder.maximumStringBytes))))]
            )
        )
        add(
            "integers",
            fields: [
                Point.Field("min", .int(.min)), Point.Field("max", .int(.max)), Point.Field("zero", .int(0)),
                Point.Field("minus", .int(-1)),
            ]
        )
        add(
            "floats",
            fields: [
                Point.Field("largest", .float(.greatestFiniteMagnitude)),
                Point.Field("tiniest", .float(.leastNonzeroMagnitude)),
                Point.Field("negzero", .float(-0.0)), Point.Field("small", .float(1e-5)),
                Point.Field("big", .float(1e20)),
                Point.Field("tenth", .float(0.1)), Point.Field("ms", .float(123.456789)),
                Point.Field("neg", .float(-2.5e-300)),
                Point.Field("whole", .float(42)),
            ]
        )
        add("booleans", fields: [Point.Field("yes", true), Point.Field("no", false)])
        add(
            "nonfinite",
            fields: [Point.Field("nan", .float(.nan)), Point.Field("inf", .float(.infinity)), Point.Field("ok", 1.0)],
            expected: Point(measurement: "nonfinite", fields: [Point.Field("ok", 1.0)])
        )
        add(
            "reserved",
            tags: [Point.Tag("_t", "x"), Point.Tag("time", "x"), Point.Tag("empty", ""), Point.Tag("k", "v")],
            fields: [Point.Field("_f", 1), Point.Field("time", 1), Point.Field("ok", true)],
            expected: Point(measurement: "reserved", tags: [Point.Tag("k", "v")], fields: [Point.Field("ok", true)])
        )
        return cases
    }

    @Test func hardCasesReadBackFromInfluxDB1ValueByValue() async throws {
        let influx = try await InfluxDB1.freshDatabase("conformance")
        let base = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        let cases = Self.corpus(at: base)
        var lines: [UInt8] = []
        for entry in cases { try LineEncoder().encode(entry.point, into: &lines) }
        let reply = try await influx.write(lines)
        #expect(reply.status == 204, "InfluxDB refused the corpus: \(reply.text)")

        let types = try await influx.query("SHOW FIELD KEYS")
        for entry in cases {
            let want = entry.expected
            let quoted = want.measurement.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"")
            let series = try await influx.query("SELECT * FROM \"\(quoted)\"")
            guard let found = series.first(where: { $0.name == want.measurement }) else {
                Issue.record("measurement \(String(reflecting: want.measurement)) not found")
                continue
            }
            let time = want.timestamp!.value(in: .ns)!
            guard let row = found.rows.first(where: { ($0["time"] as? NSNumber)?.int64Value == time }) else {
                Issue.record("no row at \(time) in \(want.measurement)")
                continue
            }
            let fieldTypes = Dictionary(
                uniqueKeysWithValues: (types.first { $0.name == want.measurement }?.values ?? []).map {
                    ($0[0] as! String, $0[1] as! String)
                }
            )
            for tag in want.tags {
                #expect(
                    row[tag.key] as? String == tag.value,
                    "tag \(String(reflecting: tag.key)) of \(want.measurement)"
                )
            }
            for field in want.fields {
                let stored = row[field.key]
                switch field.value {
                case .string(let value):
                    #expect(stored as? String == value, "string \(field.key) of \(want.measurement)")
                    #expect(fieldTypes[field.key] == "string")
                case .int(let value):
                    #expect(
                        (stored as? NSNumber)?.int64Value == value,
                        "integer \(field.key): \(String(describing: stored))"
                    )
                    #expect(fieldTypes[field.key] == "integer")
                case .float(let value):
                    #expect(
                        (stored as? NSNumber)?.doubleValue == value,
                        "float \(field.key): \(String(describing: stored))"
                    )
                    #expect(fieldTypes[field.key] == "float")
                case .bool(let value):
                    #expect((stored as? NSNumber)?.boolValue == value, "bool \(field.key)")
                    #expect(fieldTypes[field.key] == "boolean")
                case .uint:
                    Issue.record("InfluxDB 1.x has no unsigned integers")
                }
            }
            let expectedColumns = Set(["time"] + want.tags.map(\.key) + want.fields.map(\.key))
            for (column, value) in row where !expectedColumns.contains(column) {
                #expect(value is NSNull, "unexpected column \(String(reflecting: column)) in \(want.measurement)")
            }
        }
    }

    @Test func unsignedIntegersReachVictoriaMetricsThroughTheV2WriteAPI() async throws {
        let victoria = try VictoriaMetrics()
        let measurement = "conformance_u_\(UInt32.random(in: 0...UInt32.max))"
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        let values: [UInt64] = [0, 1, 1 << 53, UInt64.max]
        var lines: [UInt8] = []
        for (index, value) in values.enumerated() {
            try LineEncoder().encode(
                Point(
                    measurement: measurement,
                    tags: [Point.Tag("case", "c\(index)")],
                    fields: [Point.Field("value", .uint(value))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now + Int64(index) * 1_000_000)
                ),
                into: &lines
            )
        }
        #expect(String(decoding: lines, as: UTF8.self).contains("value=18446744073709551615u"))
        let reply = try await victoria.write(lines)
        #expect(reply.status == 204, "VictoriaMetrics refused: \(reply.text)")
        var exported: [VictoriaMetrics.Series] = []
        _ = try await waitUntil {
            exported = try await victoria.export(namePattern: "\(measurement)_value")
            return exported.count >= values.count
        }
        #expect(exported.count == values.count)
        for (index, value) in values.enumerated() {
            let series = exported.first { $0.labels["case"] == "c\(index)" }
            // VictoriaMetrics keeps floats with a decimal mantissa: exact up to 2^53, close beyond.
            let stored = try #require(series?.values.first, "case \(index)")
            if value <= 1 << 53 {
                #expect(stored == Double(value), "case \(index)")
            } else {
                #expect(abs(stored - Double(value)) / Double(value) < 1e-12, "case \(index): \(stored)")
            }
            #expect(series?.timestamps == [(now + Int64(index) * 1_000_000) / 1_000_000])
        }
    }
}
