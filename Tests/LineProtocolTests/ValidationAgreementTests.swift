import LineProtocol
import TestSupport
import Testing

/// `validateLine` (spool restore, influx-tail) and `parseLine` must accept exactly the same lines.
@Suite struct ValidationAgreementTests {
    private static func outcomes(_ line: [UInt8]) -> (validated: Bool?, parsed: Bool?) {
        let parser = LineParser()
        let validated = line.withUnsafeBufferPointer { buffer in try? parser.validateLine(buffer) }
        let parsed: Bool?
        var point: Point?
        do {
            point = try parser.parseLine(line)
            parsed = point != nil
        } catch {
            parsed = nil
        }
        // `scanLine` (the relay's) accepts the same lines, and its spans name the point's parts.
        var spans = LineSpans()
        let scanned = line.withUnsafeBufferPointer { buffer in try? parser.scanLine(buffer, into: &spans) }
        #expect(scanned == validated, "scanLine and validateLine disagree on \(line)")
        if let point, scanned == true {
            #expect(spans.tags.count == point.tags.count && spans.fields.count == point.fields.count)
            #expect(spans.timestamp.map { Timestamp($0, precision: .ns) } == point.timestamp)
            for (span, field) in zip(spans.fields, point.fields) {
                let kind: LineSpans.Kind
                switch field.value {
                case .float: kind = .float
                case .int: kind = .int
                case .uint: kind = .uint
                case .bool: kind = .bool
                case .string: kind = .string
                }
                #expect(span.kind == kind, "\(field) in \(line)")
            }
            if !spans.hasEscapesOrLineBreaks {
                func text(_ range: Range<Int>) -> String { String(decoding: line[range], as: UTF8.self) }
                #expect(text(spans.measurement) == point.measurement)
                #expect(spans.tags.map { text($0.key) } == point.tags.map(\.key))
                #expect(spans.tags.map { text($0.value) } == point.tags.map(\.value))
                #expect(spans.fields.map { text($0.key) } == point.fields.map(\.key))
            }
        }
        return (validated, parsed)
    }

    @Test(arguments: [
        "m,a=1,a=2 v=1i",
        "m,a=1,b=2,a=3 v=1i",
        "m,a=b\rc v=1i",
    ])
    func refusedByBoth(_ text: String) {
        let (validated, parsed) = Self.outcomes(Array(text.utf8))
        #expect(validated == nil, "validateLine accepts \(text.debugDescription)")
        #expect(parsed == nil, "parseLine accepts \(text.debugDescription)")
    }

    /// Control characters other than line breaks are kept by the servers and by the encoder, so both read them.
    @Test(arguments: [
        "m v=1i,v=2i", "m v=1i,v=\"text\"", "m,a=1,b=1 a=1i,b=2i", "m s=\"\u{1B}[31m\u{0}\"", "m,a\\,b=1,a\\=b=2 v=1i",
        "m\u{0},a=1 v=1i", "m,a=\u{1B}[31m v=1i", "m,a\u{7F}=1 v=1i", "m v\u{1}=1i", "m,a=\tb v=1i",
    ])
    func acceptedByBoth(_ text: String) {
        let (validated, parsed) = Self.outcomes(Array(text.utf8))
        #expect(
            validated == true && parsed == true,
            "\(text.debugDescription): validate \(String(describing: validated)), parse \(String(describing: parsed))"
        )
    }

    static let pieces: [[UInt8]] =
        [
            ",", "=", " ", "\"", "\\", "\t", "\u{0}", "\u{1B}", "\u{7F}", "i", "u", "t", "1", "-", ".", "e", ",a=1",
            ",v=1i",
            ",v=\"s\"", ",v=t", ",v=1u", ",v=2.5", "é",
        ].map { Array($0.utf8) } + [[0xFF], [0xC3]]

    /// Random edits of valid lines, from fixed seeds; a failure names its seed and line.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func validationAgreesWithParsing(seed: UInt64) throws {
        var generator = AwkwardPoints(random: SeededGenerator(state: seed))
        var refused = 0
        for _ in 0..<RandomCases.count(4_000) {
            var line: [UInt8] = []
            _ = try? LineEncoder().encode(generator.point(), into: &line)
            if line.last == UInt8(ascii: "\n") { line.removeLast() }
            if line.isEmpty { continue }
            for _ in 0..<Int.random(in: 0...3, using: &generator.random) {
                let at = Int.random(in: 0...line.count, using: &generator.random)
                if Bool.random(using: &generator.random) || line.isEmpty {
                    line.insert(contentsOf: Self.pieces.randomElement(using: &generator.random)!, at: at)
                } else {
                    line.remove(at: min(at, line.count - 1))
                }
            }
            let (validated, parsed) = Self.outcomes(line)
            if validated != parsed {
                Issue.record(
                    "seed \(seed): validate \(String(describing: validated)), parse \(String(describing: parsed)) for \(String(reflecting: String(decoding: line, as: UTF8.self))) \(line)"
                )
                return
            }
            if parsed == nil { refused += 1 }
        }
        #expect(refused > RandomCases.count(500), "the edits must produce refused lines too (seed \(seed))")
    }
}
