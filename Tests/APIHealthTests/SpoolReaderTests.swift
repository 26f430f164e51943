import Testing

@testable import APIHealth

@Suite struct SpoolReaderTests {
    @Test func anUnterminatedQuoteCostsItsOwnLineOnly() {
        let bytes = Array("a s=\"never closed\ngood v=1i 1\nalso n=2i 2\n".utf8)
        let (lines, problems) = SpoolReader.completeLines(bytes, file: "x.lp")
        #expect(lines.map { String(decoding: $0, as: UTF8.self) } == ["good v=1i 1", "also n=2i 2"])
        #expect(problems.count == 1 && problems.first?.offset == 0, "\(problems)")
    }
}
