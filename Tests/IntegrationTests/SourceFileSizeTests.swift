import Foundation
import Testing

/// Every Swift file in `Sources/` stays readable in one sitting: at most 450 lines, a type that grows past it
/// is split into parts with one job each.
@Suite struct SourceFileSizeTests {
    static let maximumLines = 450

    @Test func noSourceFileIsOverTheLimit() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let enumerator = try #require(FileManager.default.enumerator(atPath: sources.path))
        var checked = 0
        var over: [String] = []
        while let relative = enumerator.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let text = try String(contentsOf: sources.appendingPathComponent(relative), encoding: .utf8)
            let lines =
                text.split(separator: "\n", omittingEmptySubsequences: false).count - (text.hasSuffix("\n") ? 1 : 0)
            if lines > Self.maximumLines { over.append("\(relative): \(lines) lines") }
            checked += 1
        }
        #expect(checked > 100)
        #expect(over.isEmpty, "over \(Self.maximumLines) lines: \(over.joined(separator: ", "))")
    }
}
