import Foundation
import Testing

@testable import APIHealth

/// One source of truth for names: the alert and dashboard generators read `dashboards/schema.json`, which must be
/// what this build's ``PointSchema`` describes, and must describe every name it defines; the files they generate
/// must be what they write from it.
@Suite struct SchemaDescriptionTests {
    static let committed = DashboardFiles.folder.appendingPathComponent("schema.json")

    @Test func theGeneratorsReadTheSchemaThisBuildWrites() throws {
        let file = try String(contentsOf: Self.committed, encoding: .utf8)
        #expect(
            file == (try PointSchemaDescription.current.json()),
            "run `swift run influx-tail --schema > dashboards/schema.json && scripts/build-dashboards`"
        )
    }

    /// Every `static let name = "value"` of PointSchema's name enums is in the description under its member name:
    /// a name added to the schema and not to the description fails here.
    @Test func theDescriptionHoldsEveryNameThePointSchemaDefines() throws {
        let source = try String(
            contentsOf: repositoryRoot.appendingPathComponent("Sources/APIHealth/Schema/PointSchema.swift"),
            encoding: .utf8
        )
        let description = PointSchemaDescription.current
        let sections: [(enumName: String, names: [String: String])] = [
            ("Measurement", description.measurements), ("Tag", description.tags), ("Field", description.fields),
            ("IntervalField", description.intervalFields), ("AgentField", description.agentFields),
            ("RelayField", description.relayFields),
        ]
        var total = 0
        for (enumName, names) in sections {
            let body = try #require(Self.enumBody(enumName, in: source), "enum \(enumName) in PointSchema.swift")
            let members = DashboardFiles.pairs(#"static let (\w+) = "([^"]+)""#, in: body)
            #expect(!members.isEmpty)
            for (member, value) in members {
                #expect(names[member] == value, "\(enumName).\(member) = \"\(value)\" is not in the description")
            }
            #expect(names.count == members.count, "\(enumName): the description names members PointSchema lacks")
            total += members.count
        }
        #expect(total > 80)
    }

    /// The generators, run on a copy of `dashboards/` whose schema is this build's, write exactly the committed
    /// files: no name in a generated rule or dashboard disagrees with the Swift schema.
    @Test func theGeneratedFilesAreWhatTheGeneratorsWriteFromThisSchema() throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("schema-generators-\(UUID())")
        defer { try? FileManager.default.removeItem(at: copy) }
        let scripts = copy.appendingPathComponent("scripts")
        try FileManager.default.createDirectory(at: scripts, withIntermediateDirectories: true)
        for script in ["build-dashboards", "alerting.py", "apihealth_schema.py"] {
            try FileManager.default.copyItem(
                at: repositoryRoot.appendingPathComponent("scripts/\(script)"),
                to: scripts.appendingPathComponent(script)
            )
        }
        let dashboards = copy.appendingPathComponent("dashboards")
        try FileManager.default.copyItem(at: DashboardFiles.folder, to: dashboards)
        try PointSchemaDescription.current.json().write(
            to: dashboards.appendingPathComponent("schema.json"),
            atomically: true,
            encoding: .utf8
        )
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", scripts.appendingPathComponent("build-dashboards").path]
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "scripts/build-dashboards failed: \(message)")

        let enumerator = try #require(FileManager.default.enumerator(atPath: DashboardFiles.folder.path))
        var compared = 0
        while let relative = enumerator.nextObject() as? String {
            let original = DashboardFiles.folder.appendingPathComponent(relative)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: original.path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            else { continue }
            let generated = try Data(contentsOf: dashboards.appendingPathComponent(relative))
            #expect(
                generated == (try Data(contentsOf: original)),
                "dashboards/\(relative) is not what scripts/build-dashboards writes from this build's schema"
            )
            compared += 1
        }
        #expect(compared > 10)
    }

    /// The text between `enum name {` and its closing brace at the same indentation.
    static func enumBody(_ name: String, in source: String) -> String? {
        guard let start = source.range(of: "public enum \(name) {") else { return nil }
        let lineStart = source[..<start.lowerBound].lastIndex(of: "\n").map { source.index(after: $0) }
        let indentation = lineStart.map { String(source[$0..<start.lowerBound]) } ?? ""
        guard let end = source.range(of: "\n\(indentation)}", range: start.upperBound..<source.endIndex) else {
            return nil
        }
        return String(source[start.upperBound..<end.lowerBound])
    }
}
