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
}
