import Foundation
import Testing

/// The table of locks in the article "How a request becomes a line" lists every lock the package's
/// sources make (a `Locked`, an `NSCondition`, a `NIOLockedValueBox`, a dispatch queue used as one), and
/// nothing else, in the order of their levels: a lock added without a row, a row left behind by a lock
/// removed, or a row out of order fails here.
@Suite struct LockTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let sources = root.appendingPathComponent("Sources")
    static let article = sources.appendingPathComponent("APIHealth/Docs.docc/HowARequestBecomesALine.md")

    /// A lock made in the sources: the file it is made in (its path under `Sources/`) and the name it is
    /// kept under.
    struct Declaration: Hashable, CustomStringConvertible {
        var file: String
        var name: String
        var description: String { "\(name) in \(file)" }
    }

    /// Every lock made in `Sources/`, but the lock type's own file.
    static func declarations() throws -> Set<Declaration> {
        // `let name = Locked(…)`, `let name: Locked<T> = …`, `self.name = Locked(…)`, `name = Locked(…)`
        // in an initializer, `name = (…).map { _ in Locked(…) }`, and the same for the other kinds; a
        // stored lock handed in from elsewhere (`let lock: Locked<Void>`) is not one.
        let made = try Regex(
            #"(?:\b(?:let|var)\s+|\bself\.|^\s*)(\w+)\s*(?::[^=]*)?=\s*(?:Locked\b|NSCondition\(|NIOLockedValueBox\(|DispatchQueue\(\s*label|\(.*\.map\s*\{\s*_\s+in\s+Locked\b)"#
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
                    let file = String(
                        url.standardizedFileURL.path.dropFirst(sources.standardizedFileURL.path.count + 1)
                    )
                    found.insert(Declaration(file: file, name: String(name)))
                }
            }
        }
        return found
    }

    /// A row of the table: the locks it names and its level (`nil` for a leaf).
    struct Row {
        var declarations: [Declaration]
        var level: Int?
    }

    /// The locks the article's table lists: its first column's names (after the type's, `Type.name`,
    /// one or more), its second column's file and its last column's level.
    static func table() throws -> [Row] {
        let text = try String(contentsOf: article, encoding: .utf8)
        let section = try #require(text.range(of: "### Every lock"))
        return try text[section.upperBound...].split(separator: "\n").compactMap { line -> Row? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count > 5, cells[1].hasPrefix("`"), cells[2].hasPrefix("`") else { return nil }
            let file = cells[2].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let names = Set(
                cells[1].split(separator: ",").map {
                    String($0.trimmingCharacters(in: CharacterSet(charactersIn: "` ")).split(separator: ".").last ?? "")
                }
            )
            let level = cells[4] == "leaf" ? nil : Int(cells[4])
            try #require(cells[4] == "leaf" || level != nil, "a level is a number or leaf: \(line)")
            return Row(declarations: names.map { Declaration(file: file, name: $0) }, level: level)
        }
    }

    static func rows() throws -> [Declaration] { try table().flatMap(\.declarations) }

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

    /// Rows go by level, lowest first, leaves last; within a level, the core's (`APIHealth/`) first.
    @Test func theRowsAreInTheOrderOfTheirLevels() throws {
        let rows = try Self.table()
        let order = rows.map { row in
            (level: row.level ?? .max, outsideTheCore: !(row.declarations.first?.file.hasPrefix("APIHealth/") ?? true))
        }
        for (earlier, later) in zip(order, order.dropFirst()) {
            #expect(
                earlier.level < later.level
                    || (earlier.level == later.level && (!earlier.outsideTheCore || later.outsideTheCore)),
                "a row out of order: \(earlier) before \(later)"
            )
        }
        #expect(rows.contains { $0.level == nil } && rows.contains { $0.level == 1 })
    }
}
