import APIHealth
import Foundation
import LineProtocol
import TestSupport
import Testing

/// What the encoder writes, checked against the real InfluxDB 1.x and VictoriaMetrics: the key length
/// boundary, every control character in every position, quotes and backslashes in names, and a large
/// number of random hostile points (none refused, none invalid, every change counted).
@Suite(.serialized) struct ServerConformanceTests {
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) * 1_000_000_000 }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// A point whose series key as written (`m,k=vvv…`) is `seriesBytes` long.
    static func point(seriesBytes: Int, fields: [Point.Field], at time: Int64) -> Point {
        Point(
            measurement: "m",
            tags: [Point.Tag("k", String(repeating: "v", count: seriesBytes - 4))],
            fields: fields,
            timestamp: Timestamp(nanosecondsSinceEpoch: time)
        )
    }

    @Test func keyLengthBoundaryIsInfluxDB1s() async throws {
        let influx = try await InfluxDB1.freshDatabase("keylength")
        let time = Self.now()
        // Series key + field key `f` + 4 bytes = 65,535: written and stored.
        let limit = LineEncoder.maximumKeyLength - 4 - 1
        var lines: [UInt8] = []
        #expect(
            try LineEncoder().encode(
                Self.point(seriesBytes: limit, fields: [Point.Field("f", 1)], at: time),
                into: &lines
            ).isEmpty
        )
        // One byte over for `fg`, exactly at the limit for `f`: `fg` is dropped and counted, `f` stored.
        let mixed = Self.point(seriesBytes: limit, fields: [Point.Field("fg", 2), Point.Field("f", 3)], at: time + 1)
        #expect(try LineEncoder().encode(mixed, into: &lines).droppedFields == 1)
        let reply = try await influx.write(lines)
        #expect(reply.status == 204, "\(reply.text.prefix(300))")
        let stored = try await influx.query("SELECT f FROM m")
        #expect(stored.first?.values.count == 2, "both lines stored")

        // One byte over for every field: the encoder writes nothing…
        var over: [UInt8] = []
        let tooLong = Self.point(seriesBytes: limit + 1, fields: [Point.Field("f", 1)], at: time + 2)
        #expect(throws: LineProtocolError.keyTooLong(LineEncoder.maximumKeyLength + 1)) {
            try LineEncoder().encode(tooLong, into: &over)
        }
        #expect(over.isEmpty)
        // …and that line, written by hand, is the one InfluxDB refuses: the bound is the server's.
        let byHand = "m,k=" + String(repeating: "v", count: limit + 1 - 4) + " f=1i \(time + 2)\n"
        let refused = try await influx.write(Array(byHand.utf8))
        #expect(
            refused.status == 400 && refused.text.contains("max key length exceeded"),
            "\(refused.text.suffix(200))"
        )
    }

    /// Each control character at the start, inside and at the end of every name, and inside a string:
    /// InfluxDB 1.x stores what the table on `LineEncoder` keeps exactly, VictoriaMetrics reads the same
    /// names and counts no invalid row.
    @Test func everyControlCharacterInEveryPositionReadsBackAsTheTableSays() async throws {
        let influx = try await InfluxDB1.freshDatabase("controls")
        let victoria = try VictoriaMetrics()
        let time = Self.now()
        var v1: [UInt8] = []
        var v2: [UInt8] = []
        var expected: [String: Point] = [:]
        for byte in Array(0x00...0x1F) + [0x7F] {
            let c = String(UnicodeScalar(UInt8(byte)))
            let label = "ctl\(byte)"
            let point = Point(
                measurement: c + "m" + c + "m" + c,
                tags: [Point.Tag("case", label), Point.Tag(c + "k" + c + "k" + c, c + "v" + c + "v" + c)],
                fields: [
                    Point.Field(c + "f" + c + "f" + c, .int(Int64(byte))),
                    Point.Field("s", .string(c + "s" + c + "s" + c)),
                ],
                timestamp: Timestamp(nanosecondsSinceEpoch: time + Int64(byte))
            )
            guard case .point(let want) = LineProtocolModel.expected(point, precision: .ns) else {
                Issue.record("byte \(byte) refused")
                continue
            }
            expected[label] = want
            try LineEncoder(writesUnsignedAsSigned: true).encode(point, into: &v1)
            try LineEncoder().encode(point, into: &v2)
        }
        let reply = try await influx.write(v1)
        #expect(reply.status == 204, "\(reply.text)")
        let invalidBefore = try await victoria.invalidRows()
        let vmReply = try await victoria.write(v2)
        #expect(vmReply.status == 204)
        #expect(try await victoria.invalidRows() == invalidBefore, "VictoriaMetrics refused none of the lines")

        let series = try await influx.query("SELECT * FROM /.*/ GROUP BY *")
        for entry in series {
            guard let label = entry.tags["case"], let want = expected.removeValue(forKey: label) else { continue }
            #expect(entry.name == want.measurement, "\(label): measurement \(String(reflecting: entry.name))")
            let tags = entry.tags.filter { $0.key != "case" && !$0.value.isEmpty }
            #expect(
                tags
                    == Dictionary(
                        uniqueKeysWithValues: want.tags.filter { $0.key != "case" }.map { ($0.key, $0.value) }
                    ),
                "\(label)"
            )
            let row = try #require(entry.rows.first)
            for field in want.fields {
                switch field.value {
                case .string(let value):
                    #expect(row[field.key] as? String == value, "\(label): string \(String(reflecting: value))")
                case .int(let value):
                    #expect(
                        (row[field.key] as? NSNumber)?.int64Value == value,
                        "\(label): field \(String(reflecting: field.key))"
                    )
                default: Issue.record("unexpected field \(field)")
                }
            }

            let exported = try await victoria.export(matching: "{case=\"\(label)\"}")
            let numeric = try #require(want.fields.first { $0.key != "s" })
            #expect(
                exported.contains { $0.labels["__name__"] == want.measurement + "_" + numeric.key },
                "\(label) in VictoriaMetrics"
            )
            let wantTag = try #require(want.tags.first { $0.key != "case" })
            #expect(exported.first?.labels[wantTag.key] == wantTag.value, "\(label): tag in VictoriaMetrics")
        }
        #expect(expected.isEmpty, "not found in InfluxDB: \(expected.keys.sorted())")
    }

    /// Names as VictoriaMetrics reads them from the bytes written: every pair of backslashes becomes
    /// one (InfluxDB keeps both); a single backslash is kept, also before a quote (InfluxDB drops it
    /// there in a field key).
    static func victoriaReading(_ name: String) -> String {
        var result = ""
        var pendingBackslash = false
        for character in name {
            if character == "\\" {
                if pendingBackslash {
                    result.append("\\")
                    pendingBackslash = false
                } else {
                    pendingBackslash = true
                }
                continue
            }
            if pendingBackslash { result.append("\\") }
            pendingBackslash = false
            result.append(character)
        }
        if pendingBackslash { result.append("\\") }
        return result
    }

    /// Quotes and backslashes at the start, inside and at the end of each name: InfluxDB 1.x and
    /// VictoriaMetrics read the same name except where the LineProtocol article on server differences
    /// (ServerDifferences.md) says: pairs of backslashes.
    @Test func quotesAndBackslashesReadAsTheReadmeSays() async throws {
        let influx = try await InfluxDB1.freshDatabase("quotes")
        let victoria = try VictoriaMetrics()
        let time = Self.now()
        let texts = ["\"", "\"\"", "'", "\\", "\\\\", "\\\\\\", "\\\"", "\\\\\"", "\\'", "\"\\", "\\a", "\\\\a"]
        var v1: [UInt8] = []
        var v2: [UInt8] = []
        var expected: [String: Point] = [:]
        var index = 0
        for (number, text) in texts.enumerated() {
            for position in ["m", "tk", "tv", "fk"] {
                for place in ["start", "mid", "end"] {
                    let wrap: (String) -> String = { base in
                        place == "start" ? text + base : place == "mid" ? base + text + base : base + text
                    }
                    let label = "q\(number)\(position)\(place)"
                    let point = Point(
                        measurement: position == "m" ? wrap("m") : "m",
                        tags: [
                            Point.Tag("case", label),
                            Point.Tag(position == "tk" ? wrap("k") : "k", position == "tv" ? wrap("v") : "v"),
                        ],
                        // A string after the key: VictoriaMetrics refuses the line if it takes a quote in
                        // the key for the start of a string.
                        fields: [
                            Point.Field(position == "fk" ? wrap("f") : "f", .int(1)), Point.Field("s", .string("x\"y")),
                        ],
                        timestamp: Timestamp(nanosecondsSinceEpoch: time + Int64(index))
                    )
                    index += 1
                    guard case .point(let want) = LineProtocolModel.expected(point, precision: .ns) else { continue }
                    expected[label] = want
                    try LineEncoder(writesUnsignedAsSigned: true).encode(point, into: &v1)
                    try LineEncoder().encode(point, into: &v2)
                }
            }
        }
        let reply = try await influx.write(v1)
        #expect(reply.status == 204, "\(reply.text)")
        let invalidBefore = try await victoria.invalidRows()
        _ = try await victoria.write(v2)
        #expect(try await victoria.invalidRows() == invalidBefore, "VictoriaMetrics refused none of the lines")

        let series = try await influx.query("SELECT * FROM /.*/ GROUP BY *")
        var differing = 0
        for entry in series {
            guard let label = entry.tags["case"], let want = expected.removeValue(forKey: label) else { continue }
            let wantTag = try #require(want.tags.first { $0.key != "case" })
            let fieldKey = try #require(want.fields.first?.key)
            #expect(entry.name == want.measurement, "\(label): InfluxDB measurement \(String(reflecting: entry.name))")
            #expect(entry.tags[wantTag.key] == wantTag.value, "\(label): InfluxDB tag \(entry.tags)")
            #expect(
                try #require(entry.rows.first)[fieldKey] is NSNumber,
                "\(label): InfluxDB field \(String(reflecting: fieldKey))"
            )

            let exported = try await victoria.export(matching: "{case=\"\(label)\"}")
            // Field keys are written with `\"` for a quote.
            let name =
                Self.victoriaReading(want.measurement) + "_"
                + Self.victoriaReading(fieldKey.replacingOccurrences(of: "\"", with: "\\\""))
            #expect(
                exported.contains { $0.labels["__name__"] == name },
                "\(label): VictoriaMetrics name, not in \(exported.map(\.labels))"
            )
            #expect(
                exported.first?.labels[Self.victoriaReading(wantTag.key)] == Self.victoriaReading(wantTag.value),
                "\(label): \(exported.first?.labels ?? [:])"
            )
            if name != want.measurement + "_" + fieldKey || Self.victoriaReading(wantTag.key) != wantTag.key
                || Self.victoriaReading(wantTag.value) != wantTag.value
            {
                differing += 1
            }
        }
        #expect(expected.isEmpty, "not found in InfluxDB: \(expected.keys.sorted())")
        #expect(differing > 0, "the divergence ServerDifferences.md documents is gone: update that article")
    }
}
