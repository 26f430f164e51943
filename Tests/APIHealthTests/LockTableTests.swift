import Foundation
import Testing

/// The table of locks in the article "How a request becomes a line" lists every lock `Sources/APIHealth`
/// makes (a `Locked`, an `NSCondition`, a dispatch queue used as one), and nothing else: a lock added
/// without a row, or a row left behind by a lock removed, fails here.
@Suite struct LockTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let sources = root.appendingPathComponent("Sources/APIHealth")
    static let article = sources.appendingPathComponent("Docs.docc/HowARequestBecomesALine.md")

    /// A lock made in the sources: the file it is made in and the name it is kept under.
    struct Declaration: Hashable, CustomStringConvertible {
        var file: String
        var name: String
        var description: String { "\(name) in \(file)" }
    }

    /// Every lock made in `Sources/APIHealth`, but the lock type's own file.
    static func declarations() throws -> Set<Declaration> {
        // `let name = Locked(…)`, `let name: Locked<T> = …`, `self.name = Locked(…)`, and the same for
        // the other kinds; a stored lock handed in from elsewhere (`let lock: Locked<Void>`) is not one.
        let made = try Regex(
            #"(?:\b(?:let|var)\s+|\bself\.)(\w+)\s*(?::[^=]*)?=\s*(?:Locked\b|NSCondition\(|DispatchQueue\(\s*label)"#
        )
        var found = Set<Declaration>()
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard url.pathExtension == "swift", url.lastPathComponent != "Locked.swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for line in text.split(separator: "\n") {
                if line.trimmingCharacters(in: .whitespaces).hasPrefix("//") { continue }
                for match in line.matches(of: made) {
                    guard let name = match.output[1].substring else { continue }
                    found.insert(Declaration(file: url.lastPathComponent, name: String(name)))
                }
            }
        }
        return found
    }

    /// The locks the article's table lists: its first column's name (after the type's, `Type.name`)
    /// and its second column's file.
    static func rows() throws -> [Declaration] {
        let text = try String(contentsOf: article, encoding: .utf8)
        let section = try #require(text.range(of: "### Every lock"))
        return text[section.upperBound...].split(separator: "\n").compactMap { line -> Declaration? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count > 3, cells[1].hasPrefix("`"), cells[2].hasPrefix("`") else { return nil }
            let lock = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let file = cells[2].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            return Declaration(file: file, name: String(lock.split(separator: ".").last ?? ""))
        }
    }

    @Test func everyLockTheSourcesMakeHasARow() throws {
        let declared = try Self.declarations()
        let listed = Set(try Self.rows())
        #expect(!declared.isEmpty)
        for missing in declared.subtracting(listed).sorted(by: { $0.description < $1.description }) {
            Issue.record("\(missing) is not in the table of locks in HowARequestBecomesALine.md")
        }
    }

    @Test func everyRowIsALockTheSourcesMake() throws {
        let declared = try Self.declarations()
        let rows = try Self.rows()
        #expect(rows.count == Set(rows).count, "a lock listed twice")
        for stale in Set(rows).subtracting(declared).sorted(by: { $0.description < $1.description }) {
            Issue.record("the table lists \(stale), which the sources do not make")
        }
    }
}
