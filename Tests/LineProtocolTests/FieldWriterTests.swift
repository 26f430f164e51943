@testable import LineProtocol
import TestSupport
import Testing

/// Lines written through a ``FieldWriter`` must be exactly the lines ``LineEncoder/encode(fields:timestamp:series:into:)``
/// writes for the same fields, with the same repairs and the same errors.
@Suite struct FieldWriterTests {
    /// Encodes `fields` both ways after `series`; returns the two outcomes as text.
    func bothWays(
        _ fields: [Point.Field],
        series: SeriesKey,
        timestamp: Timestamp?,
        encoder: LineEncoder
    ) -> (written: String, expected: String) {
        var viaWriter: [UInt8] = Array("previous\n".utf8)
        var viaFields = viaWriter
        let keys = fields.map { try? FieldKey($0.key) }
        let written: String
        do {
            let repairs = try encoder.encode(series: series, timestamp: timestamp, into: &viaWriter) { writer in
                for (field, key) in zip(fields, keys) {
                    guard let key else { continue }
                    switch field.value {
                    case .float(let value): writer.add(key, value)
                    case .int(let value): writer.add(key, value)
                    case .uint(let value): writer.add(key, unsigned: value)
                    case .bool(let value): writer.add(key, value)
                    case .string(let value): writer.add(key, value)
                    }
                }
            }
            written = String(decoding: viaWriter, as: UTF8.self) + "\(repairs)"
        } catch {
            written = String(decoding: viaWriter, as: UTF8.self) + "\(error)"
        }
        let expected: String
        do {
            let repairs = try encoder.encode(fields: fields, timestamp: timestamp, series: series, into: &viaFields)
            expected = String(decoding: viaFields, as: UTF8.self) + "\(repairs)"
        } catch {
            expected = String(decoding: viaFields, as: UTF8.self) + "\(error)"
        }
        return (written, expected)
    }

    @Test func writesWhatTheFieldsPathWrites() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var names = DirectEncodingTests.Names(random: SeededGenerator(state: seed))
        var compared = 0
        var refused = 0
        for index in 0..<RandomCases.count(20_000) {
            let point = names.point()
            guard let series = try? SeriesKey(measurement: point.measurement, tags: point.tags) else { continue }
            // Keys a FieldKey refuses and earlier duplicates are the two documented differences: the
            // fields path drops or repairs such keys per line, and keeps the last of a duplicate.
            var fields: [Point.Field] = []
            for (position, field) in point.fields.enumerated() where (try? FieldKey(field.key)) != nil {
                if !point.fields[(position + 1)...].contains(where: { $0.key.utf8.elementsEqual(field.key.utf8) }) {
                    fields.append(field)
                }
            }
            let encoder = LineEncoder(precision: .ns, writesUnsignedAsSigned: index % 2 == 0)
            let (written, expected) = bothWays(fields, series: series, timestamp: point.timestamp, encoder: encoder)
            guard written == expected else {
                Issue.record("seed \(seed), point \(index): \(fields)\nwriter: \(written)\nfields: \(expected)")
                return
            }
            if fields.isEmpty { refused += 1 }
            compared += 1
        }
        #expect(
            compared > RandomCases.count(10_000) && refused > RandomCases.count(100),
            "compared \(compared), \(refused) without fields (seed \(seed))"
        )
    }

    @Test func longStringsAndManyFieldsTakeASecondAttempt() throws {
        let series = try SeriesKey(measurement: "m", tags: [Point.Tag("host", "h")])
        let cases: [[Point.Field]] = [
            [Point.Field("s", .string(String(repeating: "x", count: 3_000) + "\"q\\"))],
            [Point.Field("s", .string(String(repeating: "é", count: 40_000)))],
            [Point.Field("s", .string(String(repeating: "a\n", count: 700)))],
            (0..<200).map { Point.Field("field_\($0)", .float(Double($0) + 0.25)) },
            [
                Point.Field("a", .int(1)), Point.Field("b", .string(String(repeating: "z", count: 1_000))),
                Point.Field("c", .bool(false)),
            ],
        ]
        for fields in cases {
            for timestamp in [nil, Timestamp(nanosecondsSinceEpoch: -9_000_000_000_000_000_000)] {
                let (written, expected) = bothWays(fields, series: series, timestamp: timestamp, encoder: LineEncoder())
                #expect(written == expected, "\(fields.count) fields of \(fields.map(\.key.utf8.count))")
            }
        }
    }

    /// Series keys of every length around the point where one of the field keys no longer fits
    /// InfluxDB 1.x's key length limit, and where none does.
    @Test func keyLengthLimitMatchesTheFieldsPath() throws {
        let fields = [Point.Field("a", .int(1)), Point.Field("long_key", .float(2.5)), Point.Field("mid", .bool(true))]
        for length in (LineEncoder.maximumKeyLength - 14)...(LineEncoder.maximumKeyLength - 3) {
            let series = try SeriesKey(measurement: String(repeating: "m", count: length))
            let (written, expected) = bothWays(
                fields,
                series: series,
                timestamp: Timestamp(seconds: 1),
                encoder: LineEncoder()
            )
            #expect(written == expected, "series of \(length) bytes")
        }
    }

    /// Millionths are written exactly as the float they stand for, on both sides of 2⁴³ (where the
    /// writer hands over to the float path) and of 2⁵³.
    @Test func millionthsAreWrittenAsTheirFloat() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        let series = try SeriesKey(measurement: "m")
        let key = try FieldKey("duration_ms")
        var values: [Int64] = [
            0, 1, -1, 5, 10, 999_999, 1_000_000, 1_000_001, 12_345_678, 12_345_000, -12_345_000, .max, .min + 1,
        ]
        for offset in -3...3 {
            values += [
                (1 << 53) + Int64(offset), -(1 << 53) + Int64(offset), (1 << 43) + Int64(offset),
                -(1 << 43) + Int64(offset),
            ]
        }
        for _ in 0..<RandomCases.count(20_000) {
            let magnitude = Int64.random(in: 0...(1 << Int64.random(in: 0...62, using: &random)), using: &random)
            values.append(Bool.random(using: &random) ? magnitude : -magnitude)
        }
        for value in values {
            var viaMillionths: [UInt8] = []
            var viaFloat: [UInt8] = []
            try LineEncoder().encode(series: series, timestamp: nil, into: &viaMillionths) {
                $0.add(key, millionths: value)
            }
            try LineEncoder().encode(series: series, timestamp: nil, into: &viaFloat) {
                $0.add(key, Double(value) / 1_000_000)
            }
            guard viaMillionths == viaFloat else {
                Issue.record(
                    "seed \(seed), \(value): \(String(decoding: viaMillionths, as: UTF8.self)) vs \(String(decoding: viaFloat, as: UTF8.self))"
                )
                return
            }
        }
    }

    @Test func aKeyAddedTwiceKeepsItsFirstValue() throws {
        let series = try SeriesKey(measurement: "m")
        let first = try FieldKey("a=b")
        let same = try FieldKey("a=b")
        let other = try FieldKey("c")
        var buffer: [UInt8] = []
        let repairs = try LineEncoder().encode(series: series, timestamp: nil, into: &buffer) { writer in
            writer.add(first, "x,a\\=b=1\"")
            writer.add(other, 1.5)
            writer.add(same, Int64(2))
        }
        #expect(String(decoding: buffer, as: UTF8.self) == "m a\\=b=\"x,a\\\\=b=1\\\"\",c=1.5\n")
        #expect(repairs.droppedFields == 1)
    }

    @Test func keysThatNeedCareAreRefused() {
        for name in ["", "_x", "time", "a\\", "a\\,b", "\tx", "a\nb"] {
            #expect(throws: LineProtocolError.unwritableFieldKey(name)) { try FieldKey(name) }
        }
        #expect((try? FieldKey("a b,c=\"d")) != nil, "escapable characters are fine")
        #expect((try? FieldKey("a\\b")) != nil, "a backslash InfluxDB reads literally is fine")
    }

    @Test func aLineWithoutFieldsIsRefusedAndLeavesTheBufferAlone() throws {
        let series = try SeriesKey(measurement: "m")
        var buffer: [UInt8] = Array("kept\n".utf8)
        #expect(throws: LineProtocolError.noFields) {
            try LineEncoder().encode(series: series, timestamp: nil, into: &buffer) { writer in
                writer.add(try! FieldKey("nan"), Double.nan)
            }
        }
        #expect(buffer == Array("kept\n".utf8))
    }

    /// The timestamp is claimed (`adjust` called) exactly once per line written, also for a line
    /// that takes a second attempt, and never for a line that is refused: a refused line must not
    /// take an instant from its series.
    @Test func theTimestampIsAdjustedOnceAndOnlyForALineWritten() throws {
        let series = try SeriesKey(measurement: "m")
        let key = try FieldKey("v")
        var buffer: [UInt8] = []
        var calls = 0
        let instant = { Timestamp(nanosecondsSinceEpoch: $0) }
        let claim = { (_: UnsafeBufferPointer<UInt8>, timestamp: Int64) -> Int64? in
            calls += 1
            return timestamp + 1
        }
        try LineEncoder().encode(series: series, timestamp: instant(5), into: &buffer, claimingTimestamp: claim) {
            $0.add(key, Int64(1))
        }
        #expect(calls == 1)
        let long = String(repeating: "x", count: 3_000)
        try LineEncoder().encode(series: series, timestamp: instant(7), into: &buffer, claimingTimestamp: claim) {
            $0.add(key, long)
        }
        #expect(calls == 2, "a line longer than the first attempt's room is claimed once")
        #expect(String(decoding: buffer, as: UTF8.self) == "m v=1i 6\nm v=\"\(long)\" 8\n")
        #expect(throws: LineProtocolError.noFields) {
            try LineEncoder().encode(series: series, timestamp: instant(9), into: &buffer, claimingTimestamp: claim) {
                $0.add(key, Double.nan)
            }
        }
        #expect(calls == 2, "a line without fields claims nothing")
    }
}
