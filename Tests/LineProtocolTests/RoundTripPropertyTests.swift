import LineProtocol
import TestSupport
import Testing

/// Random points made of the characters line protocol finds hardest, and the point each should read
/// back as, computed from the encoder's documented rules independently of its code.
struct AwkwardPoints {
    var random: SeededGenerator

    static let alphabet: [String] = [
        ",", "=", " ", "\"", "\\", "\n", "\r", "\t", "#", "_", "é", "e\u{301}", "日本", "🚀", "\u{0}", "\u{7F}",
        "a", "b", "z", "0", "9", "-", ".", "{", "}", "/", "'", "time",
    ]

    mutating func text(maxLength: Int) -> String {
        let length = Int.random(in: 0...maxLength, using: &random)
        var result = ""
        for _ in 0..<length { result += Self.alphabet.randomElement(using: &random)! }
        return result
    }

    /// Mostly plain names with an awkward one now and then, so most points are writable.
    mutating func name() -> String {
        Int.random(in: 0..<4, using: &random) == 0 ? text(maxLength: 6) : "k" + text(maxLength: 4)
    }

    mutating func value() -> FieldValue {
        switch Int.random(in: 0..<9, using: &random) {
        case 0: return .int(Int64(bitPattern: random.next()))
        case 1: return .int([Int64.min, Int64.max, 0, -1].randomElement(using: &random)!)
        case 2: return .uint(random.next())
        case 3: return .bool(Bool.random(using: &random))
        case 4: return .string(text(maxLength: 12))
        case 5:
            let special: [Double] = [
                .nan, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -0.0,
            ]
            return .float(special.randomElement(using: &random)!)
        case 6: return .float(Double(Int.random(in: 0..<10_000_000, using: &random)) / 1_000_000)
        default:
            let bits = random.next()
            let value = Double(bitPattern: bits)
            return .float(value.isFinite ? value : 1.5)
        }
    }

    mutating func point() -> Point {
        let tags = (0..<Int.random(in: 0...5, using: &random)).map { _ in Point.Tag(name(), name()) }
        let fields = (0..<Int.random(in: 0...5, using: &random)).map { _ in Point.Field(name(), value()) }
        let measurement = Int.random(in: 0..<8, using: &random) == 0 ? text(maxLength: 5) : "m" + text(maxLength: 5)
        let timestamp: Timestamp? =
            Int.random(in: 0..<5, using: &random) == 0
            ? nil : Timestamp(nanosecondsSinceEpoch: Int64(bitPattern: random.next()))
        return Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp)
    }
}

@Suite struct RoundTripPropertyTests {
    @Test func hundredThousandAwkwardPointsReadBackAsTheModelSays() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        // Long and synchronous: off the concurrency pool, which other tests' agents need meanwhile. The
        // first point that does not read back as the model says ends the run, with what went wrong.
        let (written, refused, batch, batchExpected, failure) = try await onOwnThread {
            () -> (Int, Int, [UInt8], [Point], String?) in
            var generator = AwkwardPoints(random: SeededGenerator(state: seed))
            var written = 0
            var refused = 0
            var batch: [UInt8] = []
            var batchExpected: [Point] = []
            for index in 0..<RandomCases.count(100_000) {
                let precision = Precision.allCases[index % 4]
                let point = generator.point()
                let encoder = LineEncoder(precision: precision)
                var buffer: [UInt8] = []
                let outcome: LineProtocolModel.Outcome
                do {
                    try encoder.encode(point, into: &buffer)
                    guard let parsed = try LineParser(precision: precision).parse(buffer).first else {
                        return (
                            written, refused, batch, batchExpected,
                            "seed \(seed), point \(index): no point parsed from \(String(decoding: buffer, as: UTF8.self))"
                        )
                    }
                    outcome = .point(parsed)
                    written += 1
                } catch let error as LineProtocolError {
                    outcome = .refused(error)
                    refused += 1
                } catch {
                    return (
                        written, refused, batch, batchExpected,
                        "seed \(seed), point \(index): \(error) parsing \(String(reflecting: String(decoding: buffer, as: UTF8.self)))"
                    )
                }
                let expected = LineProtocolModel.expected(point, precision: precision)
                if outcome != expected {
                    return (
                        written, refused, batch, batchExpected,
                        "seed \(seed), point \(index): \(point)\nline: \(String(decoding: buffer, as: UTF8.self))\ngot \(outcome)\nexpected \(expected)"
                    )
                }
                if precision == .ns, case .point(let parsed) = expected {
                    batch += buffer
                    batchExpected.append(parsed)
                }
            }
            return (written, refused, batch, batchExpected, nil)
        }
        if let failure {
            Issue.record(Comment(rawValue: failure))
            return
        }
        #expect(
            written > RandomCases.count(50_000) && refused > RandomCases.count(1_000),
            "the generator must exercise both outcomes (seed \(seed))"
        )
        #expect(try LineParser().parse(batch) == batchExpected, "a whole batch parses back line by line (seed \(seed))")
    }
}
