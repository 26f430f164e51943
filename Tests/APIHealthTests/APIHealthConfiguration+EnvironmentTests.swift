import Foundation
import LineProtocol
import TestSupport
import Testing

@testable import APIHealth

/// `APIHealthConfiguration.fromEnvironment`: what each variable sets, and the values refused at start.
@Suite struct APIHealthConfigurationEnvironmentTests {
    @Test func configurationErrorsAreClear() {
        #expect(throws: APIHealthConfiguration.Error.missingURL) {
            try APIHealthConfiguration.fromEnvironment(["INFLUX_BUCKET": "b"], serviceName: "s")
        }
        #expect(throws: APIHealthConfiguration.Error.relativeURL("localhost/8086")) {
            try APIHealthConfiguration.fromEnvironment(["INFLUX_URL": "localhost/8086"], serviceName: "s")
        }
        #expect(throws: APIHealthConfiguration.Error.unknownPrecision("minutes")) {
            try APIHealthConfiguration.fromEnvironment(["INFLUX_PRECISION": "minutes"], serviceName: "s")
        }
        #expect(throws: APIHealthConfiguration.Error.missingSetting("INFLUX_ORG")) {
            try APIHealthConfiguration.fromEnvironment(["INFLUX_URL": "http://localhost:8086"], serviceName: "s")
        }
    }

    @Test func tokensNeverPrint() throws {
        let file = temporaryDirectory("token").appendingPathComponent("token")
        try "s3cr3t-token\n".write(to: file, atomically: true, encoding: .utf8)
        let configuration = try APIHealthConfiguration.fromEnvironment(
            [
                "INFLUX_URL": "http://localhost:8086", "INFLUX_ORG": "o", "INFLUX_BUCKET": "b",
                "INFLUX_TOKEN_FILE": file.path,
            ],
            serviceName: "s"
        )
        #expect(configuration.destination?.token?.value == "s3cr3t-token")
        #expect(!"\(configuration)".contains("s3cr3t"))
        #expect(!String(reflecting: configuration).contains("s3cr3t"))
    }

    @Test func graphQLPathsComeFromTheEnvironmentAndEmptyTurnsThemOff() throws {
        #expect(try APIHealthConfiguration.fromEnvironment([:], serviceName: "s").capture.graphQLPaths == ["/graphql"])
        let configured = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_GRAPHQL_PATHS": "/graphql, /api/graphql,"],
            serviceName: "s"
        )
        #expect(configured.capture.graphQLPaths == ["/graphql", "/api/graphql"])
        let off = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_GRAPHQL_PATHS": ""], serviceName: "s")
        #expect(off.capture.graphQLPaths.isEmpty)
        #expect(GraphQLEndpoints(paths: off.capture.graphQLPaths) == nil)
    }

    @Test func globalTagsComeFromTheEnvironmentAndBadOnesAreRefused() throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_TAGS": "env=prod, region=eu-1,note=a\\,b\\=c", "APIHEALTH_INSTANCE": "pod-3"],
            serviceName: "s"
        )
        #expect(configuration.globalTags == ["env": "prod", "region": "eu-1", "note": "a,b=c"])
        #expect(configuration.instance == "pod-3")
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_TAGS": "env"], serviceName: "s")
        }
        for bad in [["": "x"], ["_x": "y"], ["env": ""]] {
            var configuration = APIHealthConfiguration(serviceName: "s")
            configuration.globalTags = bad
            #expect(throws: APIHealthConfiguration.Error.self) { try configuration.validate() }
        }
    }

    @Test func theAppPresetWritesNoInstanceAndTheEnvironmentStillOverridesIt() throws {
        let app = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_PRESET": "app", "APIHEALTH_APP_VERSION": "4.2.0", "APIHEALTH_COUNTRY": "BR"],
            serviceName: "shop"
        )
        #expect(app.instance.isEmpty)
        #expect(!app.everyPointTags.contains { $0.key == PointSchema.Tag.instance })
        #expect(app.everyPointTags.contains { $0.key == "app_version" && $0.value == "4.2.0" })
        #expect(app.country == "BR")
        #expect(app.correctsClock)
        #expect(app.aggregation?.interval == .seconds(60))
        #expect(app.capture.rawPoints == .none)
        #expect(app.batching.maximumAge == .seconds(300))
        #expect(app.batching.maximumPendingBytes == 4 << 20)
        #expect(app.precision == .ns, "installs' interval points stay apart only at ns")
        try app.validate()
        // Every other variable is read after the preset.
        let changed = try APIHealthConfiguration.fromEnvironment(
            [
                "APIHEALTH_PRESET": "APP", "APIHEALTH_RAW_POINTS": "errors-and-slow",
                "APIHEALTH_CLOCK_CORRECTION": "off",
            ],
            serviceName: "shop"
        )
        #expect(changed.capture.rawPoints == .errorsAndSlow)
        #expect(!changed.correctsClock)
        let service = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_PRESET": "service"], serviceName: "api")
        #expect(service.instance == APIHealthConfiguration.hostName())
        #expect(!service.correctsClock)
        // A service can share its series too.
        let shared = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_INSTANCE": ""], serviceName: "api")
        #expect(!shared.everyPointTags.contains { $0.key == PointSchema.Tag.instance })
        #expect(
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_CLOCK_CORRECTION": "yes"], serviceName: "api")
                .correctsClock
        )
        for (name, value) in [("APIHEALTH_PRESET", "phone"), ("APIHEALTH_CLOCK_CORRECTION", "sometimes")] {
            #expect(throws: APIHealthConfiguration.Error.self) {
                try APIHealthConfiguration.fromEnvironment([name: value], serviceName: "s")
            }
        }
    }

    @Test func theCacheAdvisorIsOffUnlessTurnedOn() throws {
        #expect(!APIHealthConfiguration.CaptureOptions().cacheAdvice)
        #expect(!(try APIHealthConfiguration.fromEnvironment([:], serviceName: "s")).capture.cacheAdvice)
        #expect(
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_CACHE_ADVICE": "1"], serviceName: "s")
                .capture.cacheAdvice
        )
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_CACHE_ADVICE": "maybe"], serviceName: "s")
        }
    }

    @Test func rawPointsAreErrorsAndSlowUnlessTheEnvironmentSaysAll() throws {
        #expect(APIHealthConfiguration(serviceName: "s").capture.rawPoints == .errorsAndSlow)
        #expect(APIHealthConfiguration.service("s").capture.rawPoints == .errorsAndSlow)
        #expect(try APIHealthConfiguration.fromEnvironment([:], serviceName: "s").capture.rawPoints == .errorsAndSlow)
        let all = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_RAW_POINTS": "all"], serviceName: "s")
        #expect(all.capture.rawPoints == .all)
        try all.validate()
    }

    @Test func rawPointsAndTheIntervalComeFromTheEnvironment() throws {
        for (text, expected) in [("all", RawPoints.all), ("errors-and-slow", .errorsAndSlow), ("none", .none)] {
            let configuration = try APIHealthConfiguration.fromEnvironment(
                ["APIHEALTH_RAW_POINTS": text],
                serviceName: "s"
            )
            #expect(configuration.capture.rawPoints == expected)
        }
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_RAW_POINTS": "some"], serviceName: "s")
        }
        let thirty = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_AGGREGATION_INTERVAL_MS": "30000"],
            serviceName: "s"
        )
        #expect(thirty.aggregation?.interval == .seconds(30))
        let off = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_AGGREGATION_INTERVAL_MS": "0"],
            serviceName: "s"
        )
        #expect(off.aggregation == nil)
        // Without aggregates, every request is written raw unless the environment asks for fewer, which
        // would leave requests counted nowhere.
        #expect(off.capture.rawPoints == .all)
        try off.validate()
        var unwritten = off
        unwritten.capture.rawPoints = .none
        #expect(throws: APIHealthConfiguration.Error.self) { try unwritten.validate() }
        let fewer = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_AGGREGATION_INTERVAL_MS": "0", "APIHEALTH_RAW_POINTS": "errors-and-slow"],
            serviceName: "s"
        )
        #expect(fewer.capture.rawPoints == .errorsAndSlow)
        #expect(throws: APIHealthConfiguration.Error.self) { try fewer.validate() }
        // An interval that is not a whole number of seconds would give two intervals one timestamp at `s`.
        var coarse = APIHealthConfiguration(serviceName: "s")
        coarse.precision = .s
        coarse.aggregation?.interval = .milliseconds(1_500)
        #expect(throws: APIHealthConfiguration.Error.self) { try coarse.validate() }
    }

    @Test func theEnvironmentDescribesFailoverGroupsFanOutAndFleetSettings() throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(
            [
                "INFLUX_URL": "http://a:8086, http://b:8086", "INFLUX_ORG": "acme", "INFLUX_BUCKET": "apis",
                "INFLUX_HEADERS": "X-Scope-OrgID=team-1,X-Other=2", "INFLUX_CONTENT_ENCODING": "identity",
                "INFLUX_2_URL": "http://vminsert:8480/insert/0/influx", "INFLUX_2_WRITE_API": "v3",
                "INFLUX_2_DATABASE": "apis", "INFLUX_2_NAME": "replica", "APIHEALTH_FLUSH_JITTER_MS": "2500",
                "APIHEALTH_SPOOL_DIR": "none",
            ],
            serviceName: "env"
        )
        #expect(configuration.destinations.count == 2)
        #expect(configuration.destinations[0].urls.map(\.absoluteString) == ["http://a:8086", "http://b:8086"])
        #expect(configuration.destinations[0].headers == ["X-Scope-OrgID": "team-1", "X-Other": "2"])
        #expect(configuration.destinations[0].compression == .identity)
        #expect(configuration.destinations[1].api == .v3(database: "apis"))
        #expect(configuration.destinations[1].displayName == "replica")
        #expect(configuration.batching.flushJitter == .milliseconds(2_500))
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(
                ["INFLUX_URL": "http://a:8086", "INFLUX_ORG": "o", "INFLUX_BUCKET": "b", "INFLUX_HEADERS": "broken"],
                serviceName: "env"
            )
        }
    }

    @Test func theShutdownDeadlineIsReadFromTheEnvironment() throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_SHUTDOWN_DEADLINE_MS": "2500"],
            serviceName: "deadline"
        )
        #expect(configuration.shutdownDeadline == .milliseconds(2_500))
        #expect(
            try APIHealthConfiguration.fromEnvironment([:], serviceName: "deadline").shutdownDeadline == .seconds(10)
        )
        for bad in ["", "-1", "soon"] {
            #expect(throws: APIHealthConfiguration.Error.self) {
                _ = try APIHealthConfiguration.fromEnvironment(
                    ["APIHEALTH_SHUTDOWN_DEADLINE_MS": bad],
                    serviceName: "deadline"
                )
            }
        }
    }

    @Test func theWriteThroughIntervalIsASetting() throws {
        let spool = temporaryDirectory("write-through")
        let read = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_SPOOL_DIR": spool.path, "APIHEALTH_WRITE_THROUGH_MS": "250"],
            serviceName: "write-through"
        )
        #expect(read.spool?.writeThroughInterval == .milliseconds(250))
        #expect(SpoolOptions(directory: spool).writeThroughInterval == .milliseconds(20), "20 ms by default")
        for bad in ["0", "-5", "soon"] {
            #expect(throws: APIHealthConfiguration.Error.self) {
                _ = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_WRITE_THROUGH_MS": bad], serviceName: "w")
            }
        }
        var configuration = APIHealthConfiguration(serviceName: "write-through")
        configuration.spool = SpoolOptions(directory: spool, writeThroughInterval: .zero)
        #expect(throws: APIHealthConfiguration.Error.self) { try configuration.validate() }
    }

    @Test func objectivesAreReadAsPercentagesAndThresholds() throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(
            [
                "APIHEALTH_OBJECTIVE_AVAILABILITY": "99.9", "APIHEALTH_OBJECTIVE_LATENCY": "99%",
                "APIHEALTH_OBJECTIVE_LATENCY_MS": "300", "APIHEALTH_SPOOL_DIR": "none",
            ],
            serviceName: "objectives"
        )
        #expect(configuration.objectives.default.availability == 0.999)
        #expect(configuration.objectives.default.latency == .init(target: 0.99, threshold: .milliseconds(300)))
    }

    @Test(arguments: [
        ["APIHEALTH_OBJECTIVE_AVAILABILITY": "100"], ["APIHEALTH_OBJECTIVE_AVAILABILITY": "0"],
        ["APIHEALTH_OBJECTIVE_AVAILABILITY": "high"], ["APIHEALTH_OBJECTIVE_LATENCY": "99"],
        ["APIHEALTH_OBJECTIVE_LATENCY": "99", "APIHEALTH_OBJECTIVE_LATENCY_MS": "-5"],
        ["APIHEALTH_OBJECTIVE_LATENCY_MS": "300"],
    ])
    func objectivesThatCannotBeMetAreErrors(environment: [String: String]) {
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(environment, serviceName: "objectives")
        }
    }

    @Test func anEmptySpoolDirectorySettingIsAConfigurationError() {
        #expect(throws: APIHealthConfiguration.Error.self) {
            _ = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_SPOOL_DIR": ""], serviceName: "s")
        }
        let none = try? APIHealthConfiguration.fromEnvironment(["APIHEALTH_SPOOL_DIR": "none"], serviceName: "s")
        #expect(none != nil && none?.spool == nil)
    }

    @Test func settingsThatCannotWorkAreErrorsAtStart() throws {
        let base = ["INFLUX_URL": "http://user:secret@localhost:8086", "INFLUX_ORG": "o", "INFLUX_BUCKET": "b"]
        #expect(throws: APIHealthConfiguration.Error.self) {
            _ = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_ENABLED": "maybe"], serviceName: "s")
        }
        #expect(
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_ENABLED": "off"], serviceName: "s").isEnabled
                == false
        )
        #expect(try APIHealthConfiguration.fromEnvironment(["APIHEALTH_ENABLED": "TRUE"], serviceName: "s").isEnabled)

        let folder = temporaryDirectory("token")
        let empty = folder.appendingPathComponent("empty")
        try Data("\n".utf8).write(to: empty)
        #expect(throws: APIHealthConfiguration.Error.self) {
            _ = try APIHealthConfiguration.fromEnvironment(
                base.merging(["INFLUX_TOKEN_FILE": empty.path]) { $1 },
                serviceName: "s"
            )
        }
        let broken = folder.appendingPathComponent("broken")
        try Data("abc\r\ndef\n".utf8).write(to: broken)
        #expect(throws: APIHealthConfiguration.Error.self) {
            _ = try APIHealthConfiguration.fromEnvironment(
                base.merging(["INFLUX_TOKEN_FILE": broken.path]) { $1 },
                serviceName: "s"
            )
        }
        #expect(throws: APIHealthConfiguration.Error.self) {
            _ = try APIHealthConfiguration.fromEnvironment(
                base.merging(["INFLUX_TOKEN": "abc\ndef"]) { $1 },
                serviceName: "s"
            )
        }
        let readable = folder.appendingPathComponent("readable")
        try Data("s3cr3t\n".utf8).write(to: readable)
        chmod(readable.path, 0o644)
        let configuration = try APIHealthConfiguration.fromEnvironment(
            base.merging(["INFLUX_TOKEN_FILE": readable.path]) { $1 },
            serviceName: "s"
        )
        #expect(configuration.notices.count == 1 && configuration.notices[0].contains("can be read by other users"))

        #expect(configuration.destination?.redactedURL == "http://<redacted>@localhost:8086")
        do {
            _ = try APIHealthConfiguration.fromEnvironment(
                ["INFLUX_URL": "ftp://user:secret@host/x", "INFLUX_ORG": "o", "INFLUX_BUCKET": "b"],
                serviceName: "s"
            )
            Issue.record("an ftp URL was accepted")
        } catch {
            #expect(!"\(error)".contains("secret"), "\(error)")
        }
    }
}
