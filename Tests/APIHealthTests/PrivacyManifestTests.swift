import Foundation
import Testing

/// Apple's privacy manifest (`Sources/APIHealth/PrivacyInfo.xcprivacy`): every required-reason API the
/// code an app links calls is declared with its category and a reason, nothing is tracked, and the data
/// collected is named. App Store Connect refuses an upload whose code calls such an API undeclared.
@Suite struct PrivacyManifestTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// The targets an app links, the C headers among them (the Vapor integration and the executables run
    /// on servers only).
    static let appTargets = [
        "LineProtocol", "APIHealth", "APIHealthAsyncHTTPClient", "APIHealthMetrics", "APIHealthTracing",
        "CZlib",
    ]
    /// The target whose resources carry the manifest.
    static let manifest = root.appendingPathComponent("Sources/APIHealth/PrivacyInfo.xcprivacy")

    /// Apple's required-reason APIs ("Describing use of required reason API"), by category: the names a
    /// Swift or C call site spells.
    static let requiredReasonAPIs: [String: [String]] = [
        "NSPrivacyAccessedAPICategoryFileTimestamp": [
            "stat", "fstat", "fstatat", "lstat", "getattrlist", "getattrlistbulk", "fgetattrlist", "getattrlistat",
            "creationDate", "modificationDate", "fileModificationDate", "contentModificationDateKey",
            "creationDateKey", "contentAccessDateKey", "attributeModificationDateKey",
            "NSFileCreationDate", "NSFileModificationDate", "NSURLContentModificationDateKey",
            "NSURLCreationDateKey",
        ],
        "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime", "mach_absolute_time"],
        "NSPrivacyAccessedAPICategoryDiskSpace": [
            "statfs", "statvfs", "fstatfs", "fstatvfs", "volumeAvailableCapacityKey",
            "volumeAvailableCapacityForImportantUsageKey", "volumeAvailableCapacityForOpportunisticUsageKey",
            "volumeTotalCapacityKey", "systemFreeSize", "systemSize", "NSFileSystemFreeSize", "NSFileSystemSize",
        ],
        "NSPrivacyAccessedAPICategoryActiveKeyboards": ["activeInputModes"],
        "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults", "NSUserDefaults"],
    ]

    /// A required-reason API used in a source file.
    struct Use: Hashable, CustomStringConvertible {
        var file: String
        var line: Int
        var name: String
        var category: String
        var description: String { "\(name) (\(category)) at \(file):\(line)" }
    }

    /// The required-reason APIs `text` uses: each name as a whole identifier in code, not in a comment or a
    /// string literal.
    static func uses(in text: String, file: String) -> [Use] {
        var found: [Use] = []
        for (number, line) in codeLines(of: text).enumerated() {
            for (category, names) in requiredReasonAPIs {
                for name in names where containsIdentifier(name, in: line) {
                    found.append(Use(file: file, line: number + 1, name: name, category: category))
                }
            }
        }
        return found
    }

    /// `text`'s lines with comments and string literals blanked (line breaks kept, so numbers stay).
    static func codeLines(of text: String) -> [String] {
        var out = ""
        var characters = Array(text)[...]
        var blockDepth = 0
        var inString = false
        while let character = characters.first {
            let next = characters.dropFirst().first
            if blockDepth > 0 {
                if character == "*", next == "/" {
                    blockDepth -= 1
                    characters = characters.dropFirst(2)
                } else if character == "/", next == "*" {
                    blockDepth += 1
                    characters = characters.dropFirst(2)
                } else {
                    out.append(character == "\n" ? "\n" : " ")
                    characters = characters.dropFirst()
                }
            } else if inString {
                if character == "\\" {
                    out.append("  ")
                    characters = characters.dropFirst(2)
                    continue
                }
                if character == "\"" { inString = false }
                out.append(character == "\n" ? "\n" : " ")
                characters = characters.dropFirst()
            } else if character == "/", next == "/" {
                while let c = characters.first, c != "\n" { characters = characters.dropFirst() }
            } else if character == "/", next == "*" {
                blockDepth += 1
                characters = characters.dropFirst(2)
            } else if character == "\"" {
                inString = true
                out.append(" ")
                characters = characters.dropFirst()
            } else {
                out.append(character)
                characters = characters.dropFirst()
            }
        }
        return out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    static func containsIdentifier(_ name: String, in line: String) -> Bool {
        var rest = line[...]
        while let range = rest.range(of: name) {
            let before = range.lowerBound == line.startIndex ? nil : line[line.index(before: range.lowerBound)]
            let after = range.upperBound == line.endIndex ? nil : line[range.upperBound]
            func isIdentifier(_ c: Character?) -> Bool { c.map { $0.isLetter || $0.isNumber || $0 == "_" } ?? false }
            if !isIdentifier(before) && !isIdentifier(after) { return true }
            rest = line[range.upperBound...]
        }
        return false
    }

    /// The categories a manifest declares, each with at least one reason.
    static func declaredCategories(manifest data: Data) throws -> Set<String> {
        let plist = try #require(
            try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
        )
        let accessed = try #require(plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        return Set(
            accessed.compactMap { entry in
                guard let category = entry["NSPrivacyAccessedAPIType"] as? String,
                    let reasons = entry["NSPrivacyAccessedAPITypeReasons"] as? [String], !reasons.isEmpty
                else { return nil }
                return category
            }
        )
    }

    /// The uses among `sources` (file name and text) whose category `manifest` does not declare.
    static func undeclared(sources: [(String, String)], manifest: Data) throws -> [Use] {
        let declared = try declaredCategories(manifest: manifest)
        return sources.flatMap { uses(in: $0.1, file: $0.0) }.filter { !declared.contains($0.category) }
    }

    static func appSources() throws -> [(String, String)] {
        var sources: [(String, String)] = []
        for target in appTargets {
            let directory = root.appendingPathComponent("Sources/\(target)")
            let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
            while let url = files?.nextObject() as? URL {
                guard ["swift", "c", "h", "m"].contains(url.pathExtension) else { continue }
                sources.append(("\(target)/\(url.lastPathComponent)", try String(contentsOf: url, encoding: .utf8)))
            }
        }
        return sources
    }

    @Test func everyRequiredReasonAPITheCodeUsesIsDeclared() throws {
        let sources = try Self.appSources()
        #expect(sources.count > 50)
        let manifest = try Data(contentsOf: Self.manifest)
        // The spool reads file times (fstat, fstatat): the scan finds them.
        let used = Set(sources.flatMap { Self.uses(in: $0.1, file: $0.0) }.map(\.category))
        #expect(used.contains("NSPrivacyAccessedAPICategoryFileTimestamp"))
        for use in try Self.undeclared(sources: sources, manifest: manifest) {
            Issue.record("\(use) is not declared in Sources/APIHealth/PrivacyInfo.xcprivacy")
        }
        // No category declared that the code never uses: each one is a question App Review asks.
        for category in try Self.declaredCategories(manifest: manifest).subtracting(used) {
            Issue.record("\(category) is declared but no source uses it")
        }
    }

    @Test func aFileCallingStatUndeclaredFails() throws {
        let file = """
            import Glibc
            // stat in a comment, "stat" in a string and statistics are no use.
            let statistics = "stat(path)"
            func size(_ path: String) -> Int {
                var status = stat()
                guard stat(path, &status) == 0 else { return 0 }
                return Int(status.st_size)
            }
            """
        let empty = Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict><key>NSPrivacyTracking</key><false/>
            <key>NSPrivacyAccessedAPITypes</key><array/></dict></plist>
            """.utf8
        )
        let found = try Self.undeclared(sources: [("Spool/Size.swift", file)], manifest: empty)
        #expect(found.map(\.line) == [5, 6], "\(found)")
        #expect(found.allSatisfy { $0.name == "stat" && $0.category == "NSPrivacyAccessedAPICategoryFileTimestamp" })
        // The package's own manifest declares it.
        let declared = try Self.undeclared(
            sources: [("Spool/Size.swift", file)],
            manifest: Data(contentsOf: Self.manifest)
        )
        #expect(declared.isEmpty)
    }

    @Test func theManifestTracksNothingAndNamesTheDataCollected() throws {
        let data = try Data(contentsOf: Self.manifest)
        let plist = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        #expect(plist["NSPrivacyTracking"] as? Bool == false)
        #expect((plist["NSPrivacyTrackingDomains"] as? [String])?.isEmpty == true)
        let collected = try #require(plist["NSPrivacyCollectedDataTypes"] as? [[String: Any]])
        let types = Set(collected.compactMap { $0["NSPrivacyCollectedDataType"] as? String })
        #expect(types == ["NSPrivacyCollectedDataTypePerformanceData", "NSPrivacyCollectedDataTypeCoarseLocation"])
        for entry in collected {
            #expect(entry["NSPrivacyCollectedDataTypeLinked"] as? Bool == false)
            #expect(entry["NSPrivacyCollectedDataTypeTracking"] as? Bool == false)
            #expect((entry["NSPrivacyCollectedDataTypePurposes"] as? [String])?.isEmpty == false)
        }
        let accessed = try #require(plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        let fileTimestamps = accessed.first {
            $0["NSPrivacyAccessedAPIType"] as? String == "NSPrivacyAccessedAPICategoryFileTimestamp"
        }
        #expect(fileTimestamps?["NSPrivacyAccessedAPITypeReasons"] as? [String] == ["C617.1"])
        // A resource of the target, processed into its bundle by SwiftPM (and Xcode) on every platform.
        let package = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(package.contains(#"resources: [.process("PrivacyInfo.xcprivacy")]"#))
    }
}
