import LineProtocol
import TestSupport
import Testing

/// `LineSplitter` and `validateLine` jump over bytes eight at a time; here they are held to simple
/// byte-by-byte models on mangled batches.
@Suite struct SplitAndValidateTests {
    /// The splitter's rules, one byte at a time: a quote opens a string only in the field set (after
    /// the first unescaped space), right after an unescaped `=`; strings may hold newlines.
    static func referenceSplit(_ bytes: [UInt8]) -> [(number: Int, range: Range<Int>)] {
        var lines: [(number: Int, range: Range<Int>)] = []
        var position = 0
        var number = 0
        while position < bytes.count {
            let start = position
            number += 1
            let startNumber = number
            var inString = false
            var spaces = 0
            var afterEquals = false
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if inString {
                    if byte == UInt8(ascii: "\\") {
                        index += 2
                        continue
                    }
                    if byte == UInt8(ascii: "\"") { inString = false }
                    if byte == UInt8(ascii: "\n") { number += 1 }
                } else {
                    if byte == UInt8(ascii: "\n") { break }
                    if byte == UInt8(ascii: "\\") {
                        afterEquals = false
                        let next = index + 1 < bytes.count ? bytes[index + 1] : 0
                        index += next == UInt8(ascii: "\\") ? 1 : 2
                        continue
                    }
                    if byte == UInt8(ascii: " ") { spaces += 1 }
                    if byte == UInt8(ascii: "#") && index == start { spaces = -1 }
                    if byte == UInt8(ascii: "\"") && spaces == 1 && afterEquals { inString = true }
                    afterEquals = byte == UInt8(ascii: "=")
                }
                index += 1
            }
            let end = min(index, bytes.count)
            position = end + 1
            lines.append((startNumber, start..<end))
        }
        return lines
    }

    static let noise: [[UInt8]] =
        ["\"", "\\", " ", "\n", "=", ",", "#", "\r", "é", "a", "\\\\", "=\"", "\u{FF}"].map {
            Array($0.utf8)
        } + [[0xFF], [0xC3]]

    @Test func splittingAndCheckingAgreeWithByteByByteModels() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = AwkwardPoints(random: SeededGenerator(state: seed))
        let parser = LineParser()
        var invalid = 0
        var valid = 0
        for round in 0..<3_000 {
            var batch: [UInt8] = []
            for _ in 0..<Int.random(in: 1...6, using: &generator.random) {
                _ = try? LineEncoder().encode(generator.point(), into: &batch)
            }
            if Bool.random(using: &generator.random) { batch.append(contentsOf: Array("# comment \"x\n".utf8)) }
            for _ in 0..<Int.random(in: 0...4, using: &generator.random) where !batch.isEmpty {
                let at = Int.random(in: 0...batch.count, using: &generator.random)
                batch.insert(contentsOf: Self.noise.randomElement(using: &generator.random)!, at: at)
            }
            let lines = batch.withUnsafeBufferPointer { Array(LineSplitter($0)) }
            let expected = Self.referenceSplit(batch)
            guard lines.map(\.range) == expected.map(\.range), lines.map(\.number) == expected.map(\.number) else {
                Issue.record(
                    "seed \(seed), round \(round): split differs for \(String(reflecting: String(decoding: batch, as: UTF8.self)))"
                )
                return
            }
            for line in lines {
                let bytes = Array(batch[line.range])
                let parsed = Result { () throws(LineParseError) in try parser.parseLine(bytes) }
                let checked = Result { () throws(LineParseError) in
                    try bytes.withUnsafeBufferPointer { buffer throws(LineParseError) in try parser.validateLine(buffer)
                    }
                }
                switch (parsed, checked) {
                case (.success(let point), .success(let isPoint)) where (point != nil) == isPoint: valid += 1
                case (.failure, .failure): invalid += 1
                default:
                    Issue.record(
                        "seed \(seed), round \(round): parse \(parsed) but check \(checked) for \(String(reflecting: String(decoding: bytes, as: UTF8.self)))"
                    )
                    return
                }
            }
        }
        #expect(
            valid > 1_000 && invalid > 1_000,
            "both outcomes must be exercised: \(valid) valid, \(invalid) invalid (seed \(seed))"
        )
    }
}
