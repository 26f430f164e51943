@testable import LineProtocol
import TestSupport
import Testing

/// A group's fields must be written exactly as one `add` per field writes them: the same bytes, the
/// same repairs, the same errors, whether the group takes its unchecked path or falls back.
@Suite struct NumericFieldGroupTests {
    typealias Kind = NumericFieldGroup.Kind

    /// What happens to a line before and after the group's fields.
    struct Line {
        var series: SeriesKey
        var before: [(FieldKey, Int64)] = []
        var after: [(FieldKey, String)] = []
        var encoder = LineEncoder()
    }

    /// The line written with the group, and the line written one `add` per field, as text.
    func bothWays(
        _ line: Line,
        _ fields: [(key: FieldKey, kind: Kind)],
        values: [Int64],
        present: UInt32
    ) -> (grouped: String, oneByOne: String) {
        let group = NumericFieldGroup(fields)
        func encode(_ writeGroup: (inout FieldWriter) -> Void) -> String {
            var buffer: [UInt8] = Array("previous\n".utf8)
            do {
                let repairs = try line.encoder.encode(
                    series: line.series,
                    timestamp: Timestamp(seconds: 7),
                    into: &buffer
                ) {
                    for (key, value) in line.before { $0.add(key, value) }
                    writeGroup(&$0)
                    for (key, value) in line.after { $0.add(key, value) }
                }
                return String(decoding: buffer, as: UTF8.self) + "\(repairs)"
            } catch {
                return String(decoding: buffer, as: UTF8.self) + "\(error)"
            }
        }
        let grouped = encode { writer in
            values.withUnsafeBufferPointer { writer.add(group, values: $0.baseAddress!, present: present) }
        }
        let oneByOne = encode { writer in
            for (index, field) in fields.enumerated() where present & (1 << UInt32(index)) != 0 {
                let value = values[index]
                switch field.kind {
                case .millionths: writer.add(field.key, millionths: value)
                case .signed: writer.add(field.key, value)
                case .unsigned: writer.add(field.key, unsigned: UInt64(bitPattern: value))
                case .boolean: writer.add(field.key, value != 0)
                }
            }
        }
        return (grouped, oneByOne)
    }

    func randomValue(_ kind: Kind, using random: inout SeededGenerator) -> Int64 {
        let magnitude = Int64.random(in: 0...(1 << Int64.random(in: 0...62, using: &random)), using: &random)
        switch kind {
        case .millionths, .signed: return Bool.random(using: &random) ? magnitude : -magnitude
        case .unsigned:
            return Bool.random(using: &random) ? magnitude : Int64(bitPattern: UInt64.max - UInt64(magnitude))
        case .boolean: return Int64.random(in: -1...2, using: &random)
        }
    }

    @Test func writesWhatOneAddPerFieldWrites() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        let kinds: [Kind] = [.millionths, .signed, .unsigned, .boolean]
        // Short keys (the unchecked path), one needing escapes, and one longer than three words.
        let names = [
            "duration_ms", "a", "status code", "x,y=z", "k", "b", "bytes", String(repeating: "long", count: 8),
        ]
        var compared = 0
        for _ in 0..<5_000 {
            let chosen = names.shuffled(using: &random).prefix(Int.random(in: 1...names.count, using: &random))
            let fields = try chosen.map { (key: try FieldKey($0), kind: kinds.randomElement(using: &random)!) }
            let values = fields.map { randomValue($0.kind, using: &random) }
            let present = UInt32.random(in: 0...UInt32.max, using: &random)
            var line = Line(series: try SeriesKey(measurement: "m", tags: [Point.Tag("host", "h")]))
            line.encoder = LineEncoder(writesUnsignedAsSigned: Bool.random(using: &random))
            // Sometimes a field the group holds is on the line already, sometimes a string follows.
            if Bool.random(using: &random) {
                line.before = [(try FieldKey(names.randomElement(using: &random)!), 5)]
            }
            if Bool.random(using: &random) {
                line.after = [
                    (try FieldKey("error"), String(repeating: "e", count: Int.random(in: 0...2_000, using: &random)))
                ]
            }
            let (grouped, oneByOne) = bothWays(line, fields, values: values, present: present)
            guard grouped == oneByOne else {
                Issue.record("seed \(seed): \(grouped) vs \(oneByOne)")
                return
            }
            compared += 1
        }
        #expect(compared == 5_000)
    }

    /// Series keys around the length where the group's longest key no longer fits the key length limit.
    @Test func keysPastTheLengthLimitAreDroppedAsOneByOne() throws {
        let fields = [(key: try FieldKey("a"), kind: Kind.signed), (key: try FieldKey("long_key"), kind: .millionths)]
        for length in (LineEncoder.maximumKeyLength - 14)...(LineEncoder.maximumKeyLength - 3) {
            let line = Line(series: try SeriesKey(measurement: String(repeating: "m", count: length)))
            let (grouped, oneByOne) = bothWays(line, fields, values: [1, 2_500_000], present: 0b11)
            #expect(grouped == oneByOne, "series of \(length) bytes")
        }
    }

    /// A line too long for the first attempt's room is written again with more, the group with it.
    @Test func aLongLineTakesTheSecondAttempt() throws {
        let fields = try (0..<32).map { (key: try FieldKey("field_\($0)"), kind: Kind.signed) }
        var line = Line(series: try SeriesKey(measurement: String(repeating: "m", count: 700)))
        line.before = [(try FieldKey("first"), 1)]
        let values = (0..<32).map { Int64.max - Int64($0) }
        let (grouped, oneByOne) = bothWays(line, fields, values: values, present: .max)
        #expect(grouped == oneByOne)
        #expect(grouped.contains("field_31=9223372036854775776i"))
    }

    @Test func writesTheDocumentedText() throws {
        let group = NumericFieldGroup([
            (try FieldKey("duration_ms"), .millionths), (try FieldKey("status_code"), .signed),
            (try FieldKey("bytes"), .unsigned), (try FieldKey("ok"), .boolean), (try FieldKey("unused"), .signed),
        ])
        var buffer: [UInt8] = []
        let values: [Int64] = [12_345_678, 200, -1, 1, 9]
        try LineEncoder().encode(series: try SeriesKey(measurement: "m"), timestamp: nil, into: &buffer) { writer in
            values.withUnsafeBufferPointer { writer.add(group, values: $0.baseAddress!, present: 0b0_1111) }
        }
        #expect(
            String(decoding: buffer, as: UTF8.self)
                == "m duration_ms=12.345678,status_code=200i,bytes=18446744073709551615u,ok=true\n"
        )
    }
}
