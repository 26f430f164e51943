import Foundation
import Testing

@testable import APIHealthRelay

/// Keys and limits from the environment, each variable defined once and documented.
@Suite struct RelayConfigurationTests {
    @Test func readsKeysAndLimitsFromTheEnvironment() throws {
        let configuration = try RelayConfiguration.fromEnvironment([
            "APIHEALTH_RELAY_KEYS": "k1=shop-ios:prod, k2=shop-android",
            "APIHEALTH_RELAY_PORT": "9000",
            "APIHEALTH_RELAY_CLIENT_LINES_PER_MINUTE": "1_200",
            "APIHEALTH_RELAY_RESTAMP": "on",
            "APIHEALTH_RELAY_EXTRA_TAGS": "tenant, region",
            "APIHEALTH_RELAY_CLIENT_HEADER": "X-Forwarded-For",
        ])
        #expect(configuration.keys.app(forKey: "k1") == AppKeys.App(name: "shop-ios", environment: "prod", index: 0))
        #expect(configuration.keys.app(forKey: "k2") == AppKeys.App(name: "shop-android", environment: "", index: 1))
        #expect(configuration.keys.app(forKey: "k3") == nil)
        #expect(configuration.port == 9000)
        #expect(configuration.clientLinesPerMinute == 1_200)
        #expect(configuration.restamps)
        #expect(configuration.extraTags == ["tenant", "region"])
        #expect(configuration.clientHeader == "x-forwarded-for")
    }

    @Test func refusesSettingsItCannotUse() {
        for environment in [
            [:],
            ["APIHEALTH_RELAY_KEYS": "=app"],
            ["APIHEALTH_RELAY_KEYS": "k1=:prod"],
            ["APIHEALTH_RELAY_KEYS": "k1=a,k1=b"],
            ["APIHEALTH_RELAY_KEYS": "k1=a", "APIHEALTH_RELAY_PORT": "70000"],
            ["APIHEALTH_RELAY_KEYS": "k1=a", "APIHEALTH_RELAY_NEW_SERIES_PER_HOUR": "0"],
            ["APIHEALTH_RELAY_KEYS": "k1=a", "APIHEALTH_RELAY_RESTAMP": "maybe"],
        ] as [[String: String]] {
            #expect(throws: RelayConfigurationError.self, "\(environment)") {
                try RelayConfiguration.fromEnvironment(environment)
            }
        }
    }

    @Test func everyVariableIsDocumentedInTheRelayArticle() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let article = try String(
            contentsOf: root.appendingPathComponent("Sources/APIHealth/Docs.docc/ARelayForAppInstalls.md"),
            encoding: .utf8
        )
        for variable in RelayEnvironmentVariable.allCases {
            #expect(article.contains("`\(variable.rawValue)`"), "\(variable.rawValue) is read but not documented")
        }
        let sources = root.appendingPathComponent("Sources/APIHealthRelay")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        let known = Set(RelayEnvironmentVariable.allCases.map(\.rawValue))
        let expression = try NSRegularExpression(pattern: #""(APIHEALTH_RELAY_[A-Z0-9_]+)""#)
        for file in files where file.lastPathComponent != "RelayEnvironmentVariable.swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(match.range(at: 1), in: text)!])
                #expect(known.contains(name), "\(file.lastPathComponent) reads \(name)")
            }
        }
    }
}
