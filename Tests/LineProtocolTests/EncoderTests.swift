import LineProtocol
import Testing

private func line(_ point: Point, precision: Precision = .ns) throws -> String {
    var buffer: [UInt8] = []
    try LineEncoder(precision: precision).encode(point, into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
}

@Suite struct EncoderTests {
    @Test func writesTypedFieldsSortedTagsAndTimestamp() throws {
        let point = Point(
            measurement: "req",
            tags: ["path": "/users/{id}", "host": "api.example.com"],
            fields: ["d": .float(12.5), "n": .int(-3), "b": .uint(7), "s": .string("ok"), "ok": .bool(true)],
            timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_123_456_789)
        )
        #expect(
            try line(point)
                == "req,host=api.example.com,path=/users/{id} d=12.5,n=-3i,b=7u,s=\"ok\",ok=true 1700000000123456789\n"
        )
        #expect(try line(point, precision: .ms).hasSuffix(" 1700000000123\n"))
        #expect(try line(point, precision: .s).hasSuffix(" 1700000000\n"))
    }

    @Test func escapesEachPositionAsTheSpecificationSays() throws {
        let point = Point(
            measurement: "m ,=x",
            tags: ["k ,=": "v ,=\"\\x"],
            fields: ["f ,=\"": .string("a \"quoted\" \\ path, = ok")]
        )
        // A quote in a field key is escaped too: InfluxDB reads `\"` there as the quote, and
        // VictoriaMetrics would take a raw one for the start of a string.
        #expect(try line(point) == #"m\ \,=x,k\ \,\==v\ \,\="\x f\ \,\=\"="a \"quoted\" \\ path, = ok""# + "\n")
    }

    @Test func refusesWhatLineProtocolCannotExpress() {
        var buffer: [UInt8] = Array("kept\n".utf8)
        let encoder = LineEncoder()
        #expect(throws: LineProtocolError.emptyMeasurement) {
            try encoder.encode(Point(measurement: "", fields: ["v": 1]), into: &buffer)
        }
        #expect(throws: LineProtocolError.emptyMeasurement) {
            try encoder.encode(Point(measurement: "\\\\", fields: ["v": 1]), into: &buffer)
        }
        #expect(throws: LineProtocolError.reservedMeasurement("_internal")) {
            try encoder.encode(Point(measurement: "_internal", fields: ["v": 1]), into: &buffer)
        }
        #expect(throws: LineProtocolError.reservedMeasurement("#m")) {
            try encoder.encode(Point(measurement: "#m", fields: ["v": 1]), into: &buffer)
        }
        #expect(throws: LineProtocolError.noFields) {
            try encoder.encode(Point(measurement: "m", fields: []), into: &buffer)
        }
        #expect(throws: LineProtocolError.noFields) {
            try encoder.encode(
                Point(measurement: "m", fields: ["v": .float(.nan), "w": .float(-.infinity)]),
                into: &buffer
            )
        }
        let farFuture = Timestamp(seconds: 10_000_000_000)
        #expect(throws: LineProtocolError.timestampOutOfRange(farFuture, .ns)) {
            try encoder.encode(Point(measurement: "m", fields: ["v": 1], timestamp: farFuture), into: &buffer)
        }
        #expect(buffer == Array("kept\n".utf8), "a refused point must leave the buffer as it was")
        #expect(throws: LineProtocolError.timestampOutOfRange(farFuture, .s), "past 2262 even in seconds") {
            try LineEncoder(precision: .s).encode(
                Point(measurement: "m", fields: ["v": 1], timestamp: farFuture),
                into: &buffer
            )
        }
    }

    @Test func repairsAndCountsWhatItCanRepair() throws {
        var buffer: [UInt8] = []
        let point = Point(
            measurement: "m\n",
            tags: [
                Point.Tag("empty", ""), Point.Tag("_reserved", "x"), Point.Tag("time", "x"), Point.Tag("", "x"),
                Point.Tag("dup", "first"),
                Point.Tag("dup", "second"), Point.Tag("trail\\", "v\\\\"), Point.Tag("ctl", "a\tb"),
            ],
            fields: [
                Point.Field("nan", .float(.nan)), Point.Field("time", 1), Point.Field("_f", 1), Point.Field("v", 1),
                Point.Field("v", 2),
                Point.Field("big", .string(String(repeating: "é", count: 40_000))),
            ]
        )
        let repairs = try LineEncoder().encode(point, into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        #expect(
            text.hasPrefix("m\u{FFFD},ctl=a\tb,dup=second,trail=v v=2i,big=\""),
            "a tab is stored by InfluxDB: kept"
        )
        #expect(repairs.droppedTags == 5)
        #expect(repairs.droppedFields == 4)
        #expect(repairs.truncatedStrings == 1)
        #expect(repairs.repairedNames == 3)
        let parsed = try #require(try LineParser().parse(buffer).first)
        guard case .string(let big) = parsed.field("big") else {
            Issue.record("big is not a string")
            return
        }
        #expect(big.utf8.count == 65_534, "cut to 65,535 bytes or less, on a two-byte scalar boundary")
        #expect(big.unicodeScalars.allSatisfy { $0 == "é" })
    }

    @Test func repairedTagKeysThatCollideKeepTheLast() throws {
        var buffer: [UInt8] = []
        try LineEncoder().encode(
            Point(measurement: "m", tags: ["a\\": "1", "a": "2"], fields: ["v": 1]),
            into: &buffer
        )
        #expect(String(decoding: buffer, as: UTF8.self) == "m,a=2 v=1i\n")
    }

    @Test func prerenderedSeriesKeyWritesTheSameLine() throws {
        let tags = [Point.Tag("b", "2"), Point.Tag("a", "1 x")]
        let fields = [Point.Field("d", 1.25), Point.Field("ok", false)]
        let timestamp = Timestamp(nanosecondsSinceEpoch: 42)
        let series = try SeriesKey(measurement: "m", tags: tags)
        var fromKey: [UInt8] = []
        var fromPoint: [UInt8] = []
        try LineEncoder().encode(fields: fields, timestamp: timestamp, series: series, into: &fromKey)
        try LineEncoder().encode(
            Point(measurement: "m", tags: tags, fields: fields, timestamp: timestamp),
            into: &fromPoint
        )
        #expect(fromKey == fromPoint)
        #expect(String(decoding: fromKey, as: UTF8.self) == "m,a=1\\ x,b=2 d=1.25,ok=false 42\n")
    }

    @Test func claimingTimestampSeesTheSeriesKey() throws {
        var buffer: [UInt8] = []
        var seen = ""
        try LineEncoder().encode(
            Point(
                measurement: "m",
                tags: ["z": "1", "a": "2"],
                fields: ["v": 1],
                timestamp: Timestamp(nanosecondsSinceEpoch: 5)
            ),
            into: &buffer,
            claimingTimestamp: { key, value in
                seen = String(decoding: key, as: UTF8.self)
                return value + 1
            }
        )
        #expect(seen == "m,a=2,z=1")
        #expect(String(decoding: buffer, as: UTF8.self) == "m,a=2,z=1 v=1i 6\n")
    }

    @Test func timestampsConvertExactlyAndFloorTowardsThePast() {
        let t = Timestamp(nanosecondsSinceEpoch: -1)
        #expect(t.seconds == -1 && t.nanoseconds == 999_999_999)
        #expect(t.value(in: .ns) == -1)
        #expect(t.value(in: .ms) == -1)
        #expect(Timestamp(nanosecondsSinceEpoch: Int64.max).value(in: .ns) == nil)
        #expect(Timestamp(nanosecondsSinceEpoch: Int64.max - 1).value(in: .ns) == Int64.max - 1)
        #expect(Timestamp(nanosecondsSinceEpoch: Int64.max).value(in: .s) == Int64.max / 1_000_000_000)
        #expect(
            Timestamp(1_700_000_000_123, precision: .ms) == Timestamp(seconds: 1_700_000_000, nanoseconds: 123_000_000)
        )
    }
}
