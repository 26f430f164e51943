import LineProtocol
import Testing

@Suite struct ParserTests {
    @Test func readsEveryFormTheSpecificationAllows() throws {
        let text = """
            # a comment line
            weather,location=us-midwest temperature=82 1465839830100400200\r
            m\\ x,t\\,k\\=\\ =v\\,\\=\\  f\\ k=-1.5e-3,i=-9223372036854775808i,u=18446744073709551615u,s="a\\"b\\\\c\\d"

            b a=t,b=T,c=true,d=True,e=TRUE,f=f,g=F,h=false,i=False,j=FALSE,k=.5,l=1.,m=1E+5 -5
            """
        let points = try LineParser().parse(Array(text.utf8))
        #expect(points.count == 3)
        #expect(
            points[0]
                == Point(
                    measurement: "weather",
                    tags: ["location": "us-midwest"],
                    fields: ["temperature": 82.0],
                    timestamp: Timestamp(nanosecondsSinceEpoch: 1_465_839_830_100_400_200)
                )
        )
        #expect(points[1].measurement == "m x")
        #expect(points[1].tags == [Point.Tag("t,k= ", "v,= ")])
        #expect(points[1].field("f k") == .float(-0.0015))
        #expect(points[1].field("i") == .int(Int64.min))
        #expect(points[1].field("u") == .uint(UInt64.max))
        #expect(points[1].field("s") == .string("a\"b\\c\\d"))
        #expect(points[1].timestamp == nil)
        #expect(
            points[2].fields.map(\.value) == [
                true, true, true, true, true, false, false, false, false, false, 0.5, 1.0, 100_000.0,
            ]
        )
        #expect(points[2].timestamp == Timestamp(nanosecondsSinceEpoch: -5))
    }

    @Test func stringValuesMaySpanLines() throws {
        let points = try LineParser().parse(Array("m s=\"one\ntwo\" 1\nm s=\"three\" 2\n".utf8))
        #expect(points.map { $0.field("s") } == [.string("one\ntwo"), .string("three")])
    }

    @Test func timestampsFollowThePrecision() throws {
        let points = try LineParser(precision: .ms).parse(Array("m v=1 1700000000123".utf8))
        #expect(points[0].timestamp == Timestamp(seconds: 1_700_000_000, nanoseconds: 123_000_000))
    }

    @Test(arguments: [
        ("m", 1, 2, "expected a space before the field set"),
        ("m v=1\nm,t= v=1", 2, 5, "empty tag value"),
        ("m v=nan", 1, 5, "invalid field value nan"),
        ("m v=inf", 1, 5, "invalid field value inf"),
        ("m v=1x", 1, 5, "invalid field value 1x"),
        ("m v=9223372036854775808i", 1, 5, "invalid integer 9223372036854775808i"),
        ("m v=-1u", 1, 5, "invalid unsigned integer -1u"),
        ("m v=\"open", 1, 5, "unterminated string value"),
        ("m,a=1,a=2 v=1", 1, 10, "duplicate tag key \"a\""),
        ("m v=1 12x", 1, 7, "invalid timestamp 12x"),
        ("m v=1 1 2", 1, 8, "unexpected text after the line"),
        (" v=1", 1, 1, "empty measurement"),
        ("m =1", 1, 3, "empty field key"),
        ("m,t=a=b v=1", 1, 6, "unescaped '=' in tag value"),
    ])
    func reportsLineAndColumn(input: String, line: Int, column: Int, reason: String) {
        #expect(throws: LineParseError(line: line, column: column, reason: reason)) {
            try LineParser().parse(Array(input.utf8))
        }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: LineParseError.self) {
            try LineParser().parse([
                UInt8(ascii: "m"), 0xFF, UInt8(ascii: " "), UInt8(ascii: "v"), UInt8(ascii: "="), UInt8(ascii: "1"),
            ])
        }
    }
}
