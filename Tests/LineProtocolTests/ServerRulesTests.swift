import LineProtocol
import TestSupport
import Testing

/// The rules the encoder follows so that real servers store every line exactly as the table on
/// `LineEncoder` says: key length, line breaks, control characters, unsigned values for InfluxDB 1.x.
@Suite struct ServerRulesTests {
    static func text(_ buffer: [UInt8]) -> String { String(decoding: buffer, as: UTF8.self) }

    /// A point whose series key as written is `seriesBytes` long (`m,k=vvv…`).
    static func point(seriesBytes: Int, fields: [Point.Field]) -> Point {
        Point(measurement: "m", tags: [Point.Tag("k", String(repeating: "v", count: seriesBytes - 4))], fields: fields)
    }

    @Test func aFieldKeyPastTheKeyLengthIsDroppedAndCounted() throws {
        // Series key + field key + 4 = 65,535 exactly: written.
        var buffer: [UInt8] = []
        let exact = Self.point(seriesBytes: 65_535 - 4 - 2, fields: [Point.Field("ab", 1)])
        #expect(try LineEncoder().encode(exact, into: &buffer).isEmpty)
        #expect(buffer.count == 65_535 - 4 - 2 + " ab=1i\n".utf8.count)

        // One byte over for one of two fields: that field is left out and counted.
        buffer = []
        let mixed = Self.point(seriesBytes: 65_535 - 4 - 2, fields: [Point.Field("abc", 1), Point.Field("ab", 2)])
        let repairs = try LineEncoder().encode(mixed, into: &buffer)
        #expect(repairs.droppedFields == 1)
        #expect(Self.text(buffer).hasSuffix(" ab=2i\n"))

        // Escapes count as written: `a,` is three bytes.
        buffer = []
        let escaped = Self.point(seriesBytes: 65_535 - 4 - 2, fields: [Point.Field("a,", 1), Point.Field("b", 2)])
        #expect(try LineEncoder().encode(escaped, into: &buffer).droppedFields == 1)
        #expect(Self.text(buffer).hasSuffix(" b=2i\n"))
    }

    @Test func aSeriesKeyTooLongForEveryFieldIsRefused() {
        var buffer: [UInt8] = Array("kept\n".utf8)
        let point = Self.point(seriesBytes: 65_535 - 4, fields: [Point.Field("f", 1), Point.Field("g", .string("x"))])
        #expect(throws: LineProtocolError.keyTooLong(65_536)) { try LineEncoder().encode(point, into: &buffer) }
        #expect(buffer == Array("kept\n".utf8), "nothing is written")
        #expect(throws: LineProtocolError.keyTooLong(65_536)) {
            let series = try SeriesKey(measurement: point.measurement, tags: point.tags)
            try LineEncoder().encode(fields: point.fields, timestamp: nil, series: series, into: &buffer)
        }
        #expect(buffer == Array("kept\n".utf8))
    }

    @Test func lineBreaksInStringValuesAreReplacedAndCounted() throws {
        var buffer: [UInt8] = []
        let point = Point(
            measurement: "m",
            fields: [Point.Field("s", .string("one\ntwo\r\nthree\tfour")), Point.Field("t", .string("ok"))]
        )
        let repairs = try LineEncoder().encode(point, into: &buffer)
        #expect(Self.text(buffer) == "m s=\"one\u{FFFD}two\u{FFFD}\u{FFFD}three\tfour\",t=\"ok\"\n")
        #expect(repairs.replacedLineBreaks == 1)
        #expect(buffer.filter { $0 == UInt8(ascii: "\n") }.count == 1, "one point, one line")
    }

    /// Which control characters each position keeps: InfluxDB stores all of them but line breaks, and
    /// skips a NUL or tab that starts the measurement or a field key.
    @Test func controlCharactersAreKeptWhereInfluxDBStoresThem() throws {
        let controls = (0x00...0x1F).map { UInt8($0) } + [0x7F]
        for byte in controls {
            let character = String(UnicodeScalar(byte))
            let lineBreak = byte == 0x0A || byte == 0x0D
            let leadingBlank = byte == 0x00 || byte == 0x09
            var buffer: [UInt8] = []
            let point = Point(
                measurement: character + "m" + character,
                tags: [Point.Tag(character + "k" + character, character + "v")],
                fields: [Point.Field(character + "f" + character, 1)]
            )
            let repairs = try LineEncoder().encode(point, into: &buffer)
            let r = "\u{FFFD}"
            let first = lineBreak || leadingBlank ? r : character
            let inner = lineBreak ? r : character
            #expect(
                Self.text(buffer) == "\(first)m\(inner),\(inner)k\(inner)=\(inner)v \(first)f\(inner)=1i\n",
                "byte \(byte)"
            )
            #expect(repairs.repairedNames == (lineBreak ? 4 : leadingBlank ? 2 : 0), "byte \(byte)")
        }
    }

    @Test func unsignedValuesClampedForInfluxDB1AreCounted() throws {
        var buffer: [UInt8] = []
        let point = Point(
            measurement: "m",
            fields: [Point.Field("big", .uint(.max)), Point.Field("fits", .uint(UInt64(Int64.max)))]
        )
        let repairs = try LineEncoder(writesUnsignedAsSigned: true).encode(point, into: &buffer)
        #expect(Self.text(buffer) == "m big=9223372036854775807i,fits=9223372036854775807i\n")
        #expect(repairs.clampedUnsigned == 1)
        buffer = []
        #expect(try LineEncoder().encode(point, into: &buffer).isEmpty, "the v2 encoder writes u values as they are")
    }

    @Test func aDeclinedTimestampWritesNothing() throws {
        var buffer: [UInt8] = Array("kept\n".utf8)
        let point = Point(measurement: "m", fields: ["v": 1], timestamp: Timestamp(seconds: 1))
        #expect(throws: LineProtocolError.timestampDeclined) {
            try LineEncoder().encode(point, into: &buffer, claimingTimestamp: { _, _ in nil })
        }
        let series = try SeriesKey(measurement: "m")
        #expect(throws: LineProtocolError.timestampDeclined) {
            try LineEncoder().encode(
                fields: point.fields,
                timestamp: point.timestamp,
                series: series,
                into: &buffer,
                claimingTimestamp: { _, _ in nil }
            )
        }
        let careful = Point(measurement: "m\\", fields: ["v": 1], timestamp: Timestamp(seconds: 1))
        #expect(throws: LineProtocolError.timestampDeclined) {
            try LineEncoder().encode(careful, into: &buffer, claimingTimestamp: { _, _ in nil })
        }
        #expect(buffer == Array("kept\n".utf8))
    }

    @Test func rewritingUnsignedAsSignedMatchesTheV1Encoder() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = AwkwardPoints(random: SeededGenerator(state: seed))
        var v2Lines: [UInt8] = []
        var v1Lines: [UInt8] = []
        var clamped = 0
        var clampedPoints = 0
        for _ in 0..<RandomCases.count(20_000) {
            let point = generator.point()
            do {
                try LineEncoder().encode(point, into: &v2Lines)
                let repairs = try LineEncoder(writesUnsignedAsSigned: true).encode(point, into: &v1Lines)
                clamped += repairs.clampedUnsigned
                if repairs.clampedUnsigned > 0 { clampedPoints += 1 }
            } catch {
                continue
            }
        }
        let rewrite = LineEncoder.rewritingUnsignedAsSigned(v2Lines)
        #expect(rewrite.lines == v1Lines, "seed \(seed)")
        #expect(rewrite.clampedFields == clamped && rewrite.clampedLines == clampedPoints, "seed \(seed)")
        #expect(clamped > RandomCases.count(100), "seed \(seed)")
    }

    @Test func rewritingLeavesStringsNamesAndTornLinesAlone() {
        let lines = "m\\ 1u,k=2u f=\"3u\",g=4u,h=\"a\\\"5u\nb\",i=18446744073709551615u 7\nm 8u\ntorn 9u"
        let rewrite = LineEncoder.rewritingUnsignedAsSigned(Array(lines.utf8))
        #expect(
            String(decoding: rewrite.lines, as: UTF8.self)
                == "m\\ 1u,k=2u f=\"3u\",g=4i,h=\"a\\\"5u\nb\",i=9223372036854775807i 7\nm 8u\ntorn 9u"
        )
        #expect(rewrite.rewrittenFields == 2 && rewrite.clampedFields == 1 && rewrite.clampedLines == 1)
    }
}
