@testable import LineProtocol
import TestSupport
import Testing

/// The fast path must write exactly what the careful path writes, for every point it accepts, and
/// must give way to the careful path for everything else.
@Suite struct DirectEncodingTests {
    /// Names of every length up to 40 bytes (both sides of the 1–3, 4–7 and 8-byte word paths), with
    /// escapable, repairable and multi-byte characters at random places.
    struct Names {
        var random: SeededGenerator
        static let plain: [UInt8] = Array("abcxyzABZ0189-./{}:;@~".utf8)
        static let awkward: [String] = [",", "=", " ", "\"", "\\", "\n", "\u{7F}", "é", "🚀", "#", "_", "t"]

        mutating func name(awkwardOdds: Int) -> String {
            let length = Int.random(in: 0...40, using: &random)
            var text = ""
            for _ in 0..<length {
                if Int.random(in: 0..<awkwardOdds, using: &random) == 0 {
                    text += Self.awkward.randomElement(using: &random)!
                } else {
                    text += String(decoding: [Self.plain.randomElement(using: &random)!], as: UTF8.self)
                }
            }
            return text
        }

        mutating func value() -> FieldValue {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: return .int(Int64(bitPattern: random.next()))
            case 1: return .uint(random.next())
            case 2: return .bool(Bool.random(using: &random))
            case 3: return .string(name(awkwardOdds: 6))
            case 4: return .float(Double(Int.random(in: -10_000_000..<10_000_000, using: &random)) / 1_000)
            default: return .float(Double(bitPattern: random.next()))
            }
        }

        mutating func point() -> Point {
            let odds = [3, 20, 1_000].randomElement(using: &random)!
            let tags = (0..<Int.random(in: 0...8, using: &random)).map { _ in
                Point.Tag(name(awkwardOdds: odds), name(awkwardOdds: odds))
            }
            let fields = (0..<Int.random(in: 0...9, using: &random)).map { _ in
                Point.Field(name(awkwardOdds: odds), value())
            }
            let timestamp: Timestamp? =
                Bool.random(using: &random) ? nil : Timestamp(nanosecondsSinceEpoch: Int64(bitPattern: random.next()))
            return Point(measurement: name(awkwardOdds: odds), tags: tags, fields: fields, timestamp: timestamp)
        }
    }

    @Test func fastPathWritesWhatTheCarefulPathWrites() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var names = Names(random: SeededGenerator(state: seed))
        var direct = 0
        var careful = 0
        for index in 0..<RandomCases.count(30_000) {
            let point = names.point()
            let encoder = LineEncoder(precision: .ns, writesUnsignedAsSigned: index % 2 == 0)
            let timestamp = point.timestamp?.value(in: .ns)
            var fast: [UInt8] = Array("previous line\n".utf8)
            var slow = fast
            let wroteDirectly = encoder.appendDirectly(
                point,
                timestamp: timestamp,
                to: &fast,
                adjustingTimestamp: { $1 }
            )
            let repairs = try? encoder.encodeCarefully(point, into: &slow, adjustingTimestamp: { $1 })
            if wroteDirectly {
                direct += 1
                guard fast == slow, repairs?.isEmpty == true else {
                    Issue.record(
                        "seed \(seed), point \(index): \(point)\nfast: \(String(decoding: fast, as: UTF8.self))careful: \(String(decoding: slow, as: UTF8.self))"
                    )
                    return
                }
            } else {
                careful += 1
                #expect(fast == Array("previous line\n".utf8), "a refused fast path appends nothing (seed \(seed))")
                // Everything the careful path writes without a repair must have been the fast path's,
                // but for backslashes InfluxDB reads literally (the fast path leaves all backslashes
                // to the careful one).
                let names = [point.measurement] + point.tags.flatMap { [$0.key, $0.value] } + point.fields.map(\.key)
                if repairs?.isEmpty == true && !names.contains(where: { $0.contains("\\") }) {
                    Issue.record("seed \(seed), point \(index): clean point left to the careful path: \(point)")
                    return
                }
            }
        }
        // About one point in six takes the fast path: each path is tried thousands of times.
        #expect(
            direct > RandomCases.count(3_000) && careful > RandomCases.count(3_000),
            "both paths must be exercised: \(direct) fast, \(careful) careful (seed \(seed))"
        )
    }

    /// Lines whose parts end exactly at the stack room, one byte short of it and one byte past it:
    /// the series alone (512 commas escape to 1,024 bytes), the series and its space, a field, the
    /// timestamp and the newline. Run under AddressSanitizer (`scripts/test-sanitizers`), a write past
    /// the room is a crash, not a silent corruption.
    @Test func linesAroundTheStackRoomMatchTheCarefulPath() throws {
        let room = LineEncoder.stackLineBytes
        var checked = 0
        for escapedCommas in (room / 2 - 24)...(room / 2 + 2) {
            for plainBytes in 0...1 {
                let measurement =
                    String(repeating: ",", count: escapedCommas) + String(repeating: "m", count: plainBytes)
                let seriesVariants: [(String, [Point.Tag])] = [
                    (measurement, []),
                    (String(measurement.dropFirst(4)), [Point.Tag("k", "v")]),
                ]
                let fieldVariants: [[Point.Field]] = [
                    [Point.Field("f", .int(1))],
                    [Point.Field("f", .int(.min))],
                    [Point.Field("s", .string(""))],
                    [Point.Field("s", .string("\\\\"))],
                    [Point.Field("x", .float(-1.7976931348623157e308))],
                ]
                let timestamps: [Timestamp?] = [
                    nil, Timestamp(nanosecondsSinceEpoch: 1),
                    Timestamp(nanosecondsSinceEpoch: -9_000_000_000_000_000_000),
                ]
                for (name, tags) in seriesVariants {
                    for fields in fieldVariants {
                        for timestamp in timestamps {
                            let point = Point(measurement: name, tags: tags, fields: fields, timestamp: timestamp)
                            let value = timestamp?.value(in: .ns)
                            var fast: [UInt8] = Array("x\n".utf8)
                            var slow = fast
                            let direct = LineEncoder().appendDirectly(
                                point,
                                timestamp: value,
                                to: &fast,
                                adjustingTimestamp: { $1 }
                            )
                            let repairs = try LineEncoder().encodeCarefully(
                                point,
                                into: &slow,
                                adjustingTimestamp: { $1 }
                            )
                            #expect(direct, "a clean point of \(slow.count) bytes takes the fast path")
                            #expect(repairs.isEmpty)
                            #expect(
                                fast == slow,
                                "escaped commas \(escapedCommas), tags \(tags.count), fields \(fields)"
                            )
                            checked += 1
                        }
                    }
                }
            }
        }
        // The series key alone filling the room exactly, as reported: 512 commas.
        let exact = Point(measurement: String(repeating: ",", count: room / 2), fields: [Point.Field("f", .int(1))])
        var buffer: [UInt8] = []
        try LineEncoder().encode(exact, into: &buffer)
        #expect(buffer.count == room + " f=1i\n".utf8.count)
        #expect(checked > 1_000)
    }

    @Test func longLinesTakeTheReservedRoomAndMatch() throws {
        let long = String(repeating: "x", count: 3_000)
        let point = Point(
            measurement: "m",
            tags: [Point.Tag("host", long)],
            fields: [Point.Field("s", .string(long + "\"q\""))],
            timestamp: Timestamp(nanosecondsSinceEpoch: 1)
        )
        var fast: [UInt8] = []
        var slow: [UInt8] = []
        #expect(LineEncoder().appendDirectly(point, timestamp: 1, to: &fast, adjustingTimestamp: { $1 }))
        _ = try LineEncoder().encodeCarefully(point, into: &slow, adjustingTimestamp: { $1 })
        #expect(fast == slow)
        #expect(fast.count > LineEncoder.stackLineBytes)
    }

    @Test func seriesKeyLinesMatchWholePointLines() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var names = Names(random: SeededGenerator(state: seed))
        for index in 0..<RandomCases.count(10_000) {
            let point = names.point()
            guard let series = try? SeriesKey(measurement: point.measurement, tags: point.tags) else { continue }
            var fromKey: [UInt8] = []
            var fromPoint: [UInt8] = []
            let keyOutcome = Result { () throws(LineProtocolError) in
                try LineEncoder().encode(
                    fields: point.fields,
                    timestamp: point.timestamp,
                    series: series,
                    into: &fromKey
                )
            }
            let pointOutcome = Result { () throws(LineProtocolError) in
                try LineEncoder().encode(point, into: &fromPoint)
            }
            guard fromKey == fromPoint, (try? keyOutcome.get()) == (try? pointOutcome.get()) else {
                Issue.record(
                    "seed \(seed), point \(index): \(point)\nkey: \(String(decoding: fromKey, as: UTF8.self))point: \(String(decoding: fromPoint, as: UTF8.self))"
                )
                return
            }
        }
    }
}
