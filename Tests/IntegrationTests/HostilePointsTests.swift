import APIHealth
import Foundation
import LineProtocol
import TestSupport
import Testing

/// Random points made of everything line protocol finds hard, in every position: delimiters, quotes,
/// backslashes, every kind of control character, line breaks, reserved names, non-finite floats,
/// unsigned values past `Int64.max`, duplicate keys. Names come from fixed pools so the servers see a
/// bounded number of series; a field key's type follows from its name as written, so no two points
/// disagree on it (InfluxDB would refuse the second).
struct HostilePoints {
    var random: SeededGenerator
    var measurements: [String] = []
    var tagSets: [[Point.Tag]] = []
    var fieldKeys: [String] = []

    static let alphabet: [String] = [
        ",", "=", " ", "\"", "\\", "\\\\", "\n", "\r", "\r\n", "\t", "\u{0}", "\u{1}", "\u{1B}", "\u{1F}", "\u{7F}",
        "#", "_",
        "é", "e\u{301}", "日本", "🚀", "'", "a", "b", "z", "0", "9", "-", ".", "time", "u", "i",
    ]

    init(seed: UInt64) {
        random = SeededGenerator(state: seed)
        measurements = (0..<60).map { _ in text(maxLength: 8) }
        let tagKeys = (0..<30).map { _ in text(maxLength: 6) }
        let tagValues = (0..<60).map { _ in text(maxLength: 8) }
        tagSets = (0..<40).map { _ in
            (0..<Int.random(in: 0...4, using: &random)).map { _ in
                Point.Tag(tagKeys.randomElement(using: &random)!, tagValues.randomElement(using: &random)!)
            }
        }
        fieldKeys = (0..<80).map { _ in text(maxLength: 6) }
    }

    mutating func text(maxLength: Int) -> String {
        let length = Int.random(in: 0...maxLength, using: &random)
        var result = Int.random(in: 0..<3, using: &random) == 0 ? "" : "k"
        for _ in 0..<length { result += Self.alphabet.randomElement(using: &random)! }
        return result
    }

    /// 0 integer, 1 float, 2 boolean, 3 string: from the key as InfluxDB stores it (FNV-1a).
    static func kind(ofFieldKey key: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in LineProtocolModel.repaired(key, quoteIsEscapable: true).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int(hash % 4)
    }

    mutating func value(for key: String) -> FieldValue {
        switch Self.kind(ofFieldKey: key) {
        case 0:
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return .int(Int64(bitPattern: random.next()))
            case 1: return .int([Int64.min, Int64.max, 0, -1].randomElement(using: &random)!)
            case 2: return .uint(random.next())
            default:
                return .uint([UInt64.max, UInt64(Int64.max), UInt64(Int64.max) + 1, 0].randomElement(using: &random)!)
            }
        case 1:
            let special: [Double] = [
                .nan, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -0.0, 0.1,
            ]
            if Int.random(in: 0..<4, using: &random) == 0 { return .float(special.randomElement(using: &random)!) }
            let value = Double(bitPattern: random.next())
            return .float(value.isFinite ? value : 1.5)
        case 2: return .bool(Bool.random(using: &random))
        default: return .string(text(maxLength: 16))
        }
    }

    mutating func point(at time: Int64) -> Point {
        let fields = (0..<Int.random(in: 0...4, using: &random)).map { _ -> Point.Field in
            let key = fieldKeys.randomElement(using: &random)!
            return Point.Field(key, value(for: key))
        }
        return Point(
            measurement: measurements.randomElement(using: &random)!,
            tags: tagSets.randomElement(using: &random)!,
            fields: fields,
            timestamp: Timestamp(nanosecondsSinceEpoch: time)
        )
    }
}

@Suite(.serialized) struct HostilePointsTests {
    /// How many points: `APIHEALTH_HOSTILE_POINTS` (scripts/test-hostile sets 1,000,000), else 50,000.
    static var count: Int {
        ProcessInfo.processInfo.environment["APIHEALTH_HOSTILE_POINTS"].flatMap(Int.init) ?? 50_000
    }

    /// The point as the encoder should write it if nothing needed a change: tags sorted by key bytes.
    static func unchanged(_ point: Point) -> Point {
        var point = point
        point.tags.sort { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        return point
    }

    @Test func hostilePointsReachBothServersWithNothingRefusedAndEveryChangeCounted() async throws {
        let seed =
            ProcessInfo.processInfo.environment["APIHEALTH_HOSTILE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        let count = Self.count
        print("hostile points: \(count), seed \(seed) (APIHEALTH_HOSTILE_SEED=\(seed) replays it)")
        let influx = try await InfluxDB1.freshDatabase("hostile")
        let victoria = try VictoriaMetrics()
        let invalidBefore = try await victoria.invalidRows()
        var generator = HostilePoints(seed: seed)
        let v1Encoder = LineEncoder(precision: .ns, writesUnsignedAsSigned: true)
        let v2Encoder = LineEncoder(precision: .ns)
        let start = Int64(Date().timeIntervalSince1970) * 1_000_000_000 - Int64(count)
        var v1: [UInt8] = []
        var v2: [UInt8] = []
        var written = 0
        var refusedByEncoder = 0
        var changed = 0
        var refusedByInfluxDB: [String] = []
        for index in 0..<count {
            let point = generator.point(at: start + Int64(index))
            let expected = LineProtocolModel.expected(point, precision: .ns)
            do {
                let repairs = try v2Encoder.encode(point, into: &v2)
                let v1Repairs = try v1Encoder.encode(point, into: &v1)
                guard case .point(let want) = expected else {
                    Issue.record("seed \(seed), point \(index): written, but the model refuses it: \(point)")
                    return
                }
                // Every changed value is counted: the repairs are empty exactly when the point was
                // written as given.
                let isUnchanged = want == Self.unchanged(point)
                let clamps = want.fields.filter {
                    if case .uint(let value) = $0.value { value > UInt64(Int64.max) } else { false }
                }.count
                guard repairs.isEmpty == isUnchanged, v1Repairs.clampedUnsigned == clamps,
                    v1Repairs.isEmpty == (isUnchanged && clamps == 0)
                else {
                    Issue.record(
                        "seed \(seed), point \(index): \(point)\nrepairs \(repairs), v1 \(v1Repairs), unchanged \(isUnchanged), clamps \(clamps)"
                    )
                    return
                }
                if !v1Repairs.isEmpty { changed += 1 }
                written += 1
            } catch {
                guard case .refused(let reason) = expected, reason == error else {
                    Issue.record(
                        "seed \(seed), point \(index): refused with \(error), model says \(expected): \(point)"
                    )
                    return
                }
                refusedByEncoder += 1
            }
            if v1.count >= 4 << 20 || index == count - 1 {
                let reply = try await influx.write(v1)
                if reply.status != 204 { refusedByInfluxDB.append(String(reply.text.prefix(500))) }
                let vmReply = try await victoria.write(v2)
                #expect(vmReply.status == 204, "VictoriaMetrics: \(vmReply.status) \(vmReply.text.prefix(300))")
                v1.removeAll(keepingCapacity: true)
                v2.removeAll(keepingCapacity: true)
            }
        }
        let invalid = try await victoria.invalidRows() - invalidBefore
        print(
            "hostile points: \(written) written (\(changed) with counted changes), \(refusedByEncoder) refused by the encoder, seed \(seed)"
        )
        #expect(refusedByInfluxDB.isEmpty, "seed \(seed): InfluxDB refused lines: \(refusedByInfluxDB.prefix(3))")
        #expect(invalid == 0, "seed \(seed): VictoriaMetrics counted \(invalid) invalid rows")
        #expect(written > count / 2 && changed > count / 10, "the generator must exercise both (seed \(seed))")
    }

    /// A hostile point made into one of the schema's interval points, as a hostile install would send it to the
    /// relay: its tag values as the schema's tags (and, one in four, a country or a version, valid or not), its
    /// fields as the schema's by their kind (`count=1i` first, so that a stored line counts one), and, one in
    /// fifty, a timestamp a year ahead.
    static func schemaShaped(_ point: Point, service: String, random: inout SeededGenerator) -> Point {
        typealias F = PointSchema.IntervalField
        let keys = [PointSchema.Tag.host, PointSchema.Tag.path, PointSchema.Tag.module, PointSchema.Tag.method]
        var tags = zip(keys, point.tags).map { Point.Tag($0, $1.value) }
        tags.append(Point.Tag(PointSchema.Tag.service, service))
        if Int.random(in: 0..<4, using: &random) == 0 {
            tags.append(
                Point.Tag(PointSchema.Tag.country, ["BR", "DE", "br", "XX", "Brazil"].randomElement(using: &random)!)
            )
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            tags.append(
                Point.Tag(
                    PointSchema.Tag.appVersion,
                    ["4.2.0", "2024.11+77", "4.2 beta", "é"].randomElement(using: &random)!
                )
            )
        }
        // Integers, floats, booleans, strings: an integer field, a float one, and two integer fields given a
        // boolean or a string (refused for their type).
        let byKind = [F.errors, F.durationSum, F.requestBytes, F.responseBytes]
        let fields =
            [Point.Field(F.count, .int(1))]
            + point.fields.map { Point.Field(byKind[HostilePoints.kind(ofFieldKey: $0.key)], $0.value) }
        var timestamp = point.timestamp!
        if Int.random(in: 0..<50, using: &random) == 0 {
            timestamp = Timestamp(nanosecondsSinceEpoch: timestamp.nanosecondsSinceEpoch + 365 * 86_400 * 1_000_000_000)
        }
        return Point(
            measurement: PointSchema.Measurement.requestInterval,
            tags: tags,
            fields: fields,
            timestamp: timestamp
        )
    }

    /// The same corpus through a real `apihealth-relay` into both servers, its limits out of the way so that the
    /// schema check is what decides: half the points as generated (foreign measurements, tags and fields), half
    /// made into the schema's interval points (``schemaShaped(_:service:random:)``). Every write is answered 204 or
    /// 400; the relay's counts of refusals by reason are the lines its answers refused, reason by reason; exactly
    /// the lines it took are stored, in InfluxDB 1.x and VictoriaMetrics, which counts no invalid row; the relay
    /// exits cleanly.
    @Test func hostilePointsThroughTheRelayAreTakenOrRefusedAndExactlyTheTakenStored() async throws {
        let seed =
            ProcessInfo.processInfo.environment["APIHEALTH_HOSTILE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        let count = Self.count
        print("hostile points through the relay: \(count), seed \(seed) (APIHEALTH_HOSTILE_SEED=\(seed) replays it)")
        let influx = try await InfluxDB1.freshDatabase("hostile_relay")
        let victoria = try VictoriaMetrics()
        let invalidBefore = try await victoria.invalidRows()
        let service = "hostile_relay_\(UInt32.random(in: 0...UInt32.max))"
        let relay = try RelayProcess(
            keys: "k-hostile=\(service):ci",
            influx: influx,
            victoria: victoria,
            settings: [
                "APIHEALTH_RELAY_CLIENT_LINES_PER_MINUTE": "1000000000",
                "APIHEALTH_RELAY_KEY_LINES_PER_MINUTE": "1000000000",
                "APIHEALTH_RELAY_NEW_SERIES_PER_HOUR": "1000000000",
            ]
        )
        try await relay.start()
        var generator = HostilePoints(seed: seed)
        let encoder = LineEncoder(precision: .ns)
        // A millisecond apart (VictoriaMetrics keeps milliseconds), ending two minutes ago.
        let start = (Int64(Date().timeIntervalSince1970) - 120) * 1_000_000_000 - Int64(count) * 1_000_000
        var body: [UInt8] = []
        var lines = 0
        var sent = 0
        var taken = 0
        var refusedByReason: [String: Int] = [:]
        var unexpected: [String] = []
        for index in 0..<count {
            var point = generator.point(at: start + Int64(index) * 1_000_000)
            if index % 2 == 1 { point = Self.schemaShaped(point, service: service, random: &generator.random) }
            guard (try? encoder.encode(point, into: &body)) != nil else { continue }
            lines += 1
            // At most 1,000 lines a write: a 400 lists every refused line with its reason.
            guard lines == 1_000 || index == count - 1 else { continue }
            let reply = try await relay.write(String(decoding: body, as: UTF8.self), key: "k-hostile")
            sent += lines
            switch reply.status {
            case 204:
                taken += lines
            case 400:
                let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
                let data = object?["data"] as? [[String: Any]] ?? []
                let dropped =
                    reply.text.range(of: "dropped=").flatMap {
                        Int(reply.text[$0.upperBound...].prefix { $0.isNumber })
                    } ?? -1
                if !reply.text.contains("of \(lines) lines") || data.count != dropped {
                    unexpected.append("\(reply.text.prefix(300))")
                }
                taken += lines - dropped
                for line in data {
                    let message = line["error_message"] as? String ?? ""
                    refusedByReason[String(message.prefix { $0 != ":" }), default: 0] += 1
                }
            default:
                unexpected.append("\(reply.status) \(reply.text.prefix(300))")
            }
            body.removeAll(keepingCapacity: true)
            lines = 0
        }
        #expect(unexpected.isEmpty, "seed \(seed): \(unexpected.prefix(3))")
        let refused = refusedByReason.values.reduce(0, +)
        print(
            "hostile points through the relay: \(taken) of \(sent) lines taken, refused \(refusedByReason.sorted { $0.key < $1.key }), seed \(seed)"
        )
        #expect(taken + refused == sent, "seed \(seed)")
        #expect(taken > sent / 20 && refusedByReason["measurement"] ?? 0 > sent / 4, "seed \(seed)")
        let stopped = relay.stop()
        #expect(stopped?.status == 0, "seed \(seed): \(stopped?.log.suffix(2_000) ?? "")")

        // The relay's last health point (written at SIGTERM) counts what its answers said, reason by reason.
        let health = try await influx.query(
            "SELECT last(*) FROM \"\(PointSchema.Measurement.relay)\" WHERE \"instance\" = 'relay-\(relay.port)'"
        )
        let row = health.first?.rows.first ?? [:]
        func field(_ name: String) -> Int { (row["last_\(name)"] as? NSNumber)?.intValue ?? -1 }
        typealias R = PointSchema.RelayField
        #expect(field(R.linesAccepted) == taken, "seed \(seed)")
        #expect(field(R.linesRefused) == refused, "seed \(seed)")
        for reason in R.lineRefusalReasons + R.writeRefusalReasons {
            #expect(field(R.refused(reason)) == refusedByReason[reason] ?? 0, "seed \(seed): \(reason)")
        }
        let rejected = try await influx.query(
            "SELECT last(\"points_rejected\") FROM \"apihealth_agent\" WHERE \"instance\" = 'relay-\(relay.port)'"
        )
        #expect(
            (rejected.first?.rows.first?["last"] as? NSNumber)?.intValue ?? 0 == 0,
            "seed \(seed): InfluxDB refused lines the relay took"
        )
        // Exactly the lines taken stored: each carries count=1i.
        let rows = try await influx.query(
            "SELECT sum(\"count\") FROM \"\(PointSchema.Measurement.requestInterval)\" WHERE \"service\" = '\(service)'"
        )
        #expect((rows.first?.rows.first?["sum"] as? NSNumber)?.intValue ?? 0 == taken, "seed \(seed)")
        var stored = 0
        let storedAll = try await waitUntil {
            stored = Int(
                try await victoria.export(namePattern: "\(PointSchema.Measurement.requestInterval)_count")
                    .filter { $0.labels["service"] == service }.reduce(0) { $0 + $1.values.reduce(0, +) }
            )
            return stored == taken
        }
        #expect(storedAll, "seed \(seed): \(stored) stored in VictoriaMetrics, \(taken) taken")
        #expect(try await victoria.invalidRows() == invalidBefore, "seed \(seed)")
    }
}
