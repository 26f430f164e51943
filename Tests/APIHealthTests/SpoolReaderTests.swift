import Testing

@testable import APIHealth

@Suite struct SpoolReaderTests {
    @Test func anUnterminatedQuoteCostsItsOwnLineOnly() {
        let bytes = Array("a s=\"never closed\ngood v=1i 1\nalso n=2i 2\n".utf8)
        let (lines, problems) = SpoolReader.completeLines(bytes, file: "x.lp")
        #expect(lines.map { String(decoding: $0, as: UTF8.self) } == ["good v=1i 1", "also n=2i 2"])
        #expect(problems.count == 1 && problems.first?.offset == 0, "\(problems)")
    }

    /// A segment large enough to be checked on several threads at once keeps every good line in order
    /// and reports every bad one, wherever it falls among the threads' shares (first, last, at a
    /// share's edge).
    @Test func aLargeSegmentCheckedInSharesKeepsGoodLinesAndReportsEveryBadOne() {
        let count = 10_000
        let bad: Set<Int> = [0, 1, 2_499, 2_500, 4_999, 5_000, 7_777, count - 1]
        let text = (0..<count).map { bad.contains($0) ? "m,=x v=\($0)i\n" : "m v=\($0)i \($0)\n" }.joined()
        let (lines, problems) = SpoolReader.completeLines(Array(text.utf8), file: "x.lp")
        let kept = (0..<count).filter { !bad.contains($0) }.map { "m v=\($0)i \($0)" }
        #expect(lines.map { String(decoding: $0, as: UTF8.self) } == kept)
        #expect(problems.count == bad.count, "\(problems)")
    }
}
