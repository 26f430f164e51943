import Foundation
import Testing

@testable import APIHealth

/// Every environment variable is defined once (``EnvironmentVariable``), documented in the Configuration
/// article, and no other `APIHEALTH_`/`INFLUX_` name is read by the sources.
@Suite struct EnvironmentVariableTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var documentedNames: Set<String> {
        get throws {
            let article = try String(
                contentsOf: packageRoot.appendingPathComponent("Sources/APIHealth/Docs.docc/Configuration.md"),
                encoding: .utf8
            )
            return Set(matches(#"`((?:APIHEALTH|INFLUX)_[A-Z0-9_]+)"#, in: article))
        }
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        let expression = try! NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    @Test func everyVariableIsDocumentedInTheConfigurationArticle() throws {
        let documented = try Self.documentedNames
        for variable in EnvironmentVariable.allCases {
            #expect(documented.contains(variable.rawValue), "\(variable.rawValue) is read but not documented")
        }
        for variable in EnvironmentVariable.Destination.allCases {
            #expect(
                documented.contains(variable.name(destination: 1)),
                "\(variable.name(destination: 1)) is read but not documented"
            )
        }
    }

    @Test func theSourcesReadNoVariableOutsideTheTable() throws {
        let known = Set(EnvironmentVariable.allCases.map(\.rawValue))
            .union(EnvironmentVariable.Destination.allCases.map { $0.name(destination: 1) })
        let sources = Self.packageRoot.appendingPathComponent("Sources/APIHealth")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(files.count > 40)
        for file in files where file.lastPathComponent != "EnvironmentVariable.swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for name in Self.matches(#""((?:APIHEALTH|INFLUX)_[A-Z0-9_]+)""#, in: text) {
                #expect(
                    known.contains(name),
                    "\(file.lastPathComponent) reads \(name), which is not an EnvironmentVariable"
                )
            }
        }
    }
}
