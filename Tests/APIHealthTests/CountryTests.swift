import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `country` tag: configured (checked at start), from the environment, learned from a response header the
/// API's CDN adds (once per change, a value that is no country code ignored and counted), and the transport
/// errors' kinds that the reachability alerts name.
@Suite struct CountryTests {
    @Test func countryCodesAreTwoLettersOfAnAssignedCountry() {
        #expect(CountryCode("BR")?.code == "BR")
        #expect(CountryCode(" de ")?.code == "DE")
        #expect(CountryCode("us")?.code == "US")
        #expect(CountryCode("XK")?.code == "XK")
        for refused in ["", "B", "BRA", "XX", "T1", "ZZ", "A1", "EU", "UK", "Ü1", "B R", "B\nR"] {
            #expect(CountryCode(refused) == nil, "\(refused)")
        }
        #expect(CountryCode.assigned.count == 250)
        #expect(CountryCode(regionIdentifier: "BR")?.code == "BR")
        #expect(CountryCode(regionIdentifier: "419") == nil)
        #expect(CountryCode(regionIdentifier: "001") == nil)
        #expect(CountryCode(regionIdentifier: nil) == nil)
    }

    /// The App Store storefront names its country in three letters: each assigned one maps to its two.
    @Test func aStorefrontsAlpha3CountrySetsTheCountry() {
        #expect(CountryCode(alpha3: "BRA")?.code == "BR")
        #expect(CountryCode(alpha3: "deu")?.code == "DE")
        #expect(CountryCode(alpha3: "GBR")?.code == "GB")
        #expect(CountryCode(alpha3: "XKX")?.code == "XK")
        for refused in ["", "BR", "BRAZ", "XXX", "EUR", "B A", "ÜSA"] {
            #expect(CountryCode(alpha3: refused) == nil, "\(refused)")
        }
        // Every assigned alpha-2 code has its alpha-3 one, and no two share one.
        #expect(Set(CountryCode.alpha3.values) == CountryCode.assigned)
        var configuration = APIHealthConfiguration(serviceName: "storefront")
        configuration.setCountry(fromStorefront: "JPN")
        #expect(configuration.country == "JP")
        configuration.setCountry(fromStorefront: "ZZZ")
        #expect(configuration.country == "JP")
    }

    @Test func aConfiguredCountryIsAGlobalTagCheckedAtStart() throws {
        var configuration = APIHealthConfiguration(serviceName: "country")
        configuration.spool = nil
        configuration.country = " br"
        #expect(configuration.globalTags == ["country": "BR"])
        try configuration.validate()
        #expect(configuration.everyPointTags.contains(Point.Tag("country", "BR")))

        for bad in ["Brazil", "XX", "T1", "b"] {
            var wrong = configuration
            wrong.country = bad
            #expect(throws: APIHealthConfiguration.Error.self, "\(bad)") { try wrong.validate() }
            #expect(throws: APIHealthConfiguration.Error.self) {
                try APIHealthAgent(configuration: wrong, logger: Logger(label: "country"))
            }
        }
        // Through the global tags too: one spelling, upper case.
        var lower = configuration
        lower.globalTags = ["country": "br"]
        #expect {
            try lower.validate()
        } throws: { error in
            "\(error)".contains("not an ISO 3166-1 alpha-2 country code")
        }
        var header = configuration
        header.capture.countryHeader = "Bad Header:"
        #expect(throws: APIHealthConfiguration.Error.self) { try header.validate() }
    }

    @Test func theEnvironmentSetsTheCountryAndTheHeaderToLearnItFrom() throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(
            ["APIHEALTH_COUNTRY": "de", "APIHEALTH_COUNTRY_HEADER": " CloudFront-Viewer-Country "],
            serviceName: "country"
        )
        #expect(configuration.country == "DE")
        #expect(configuration.capture.countryHeader == "CloudFront-Viewer-Country")
        #expect {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_COUNTRY": "Germany"], serviceName: "country")
        } throws: { error in
            "\(error)".contains("APIHEALTH_COUNTRY") && "\(error)".contains("Germany")
        }
        let tagged = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_TAGS": "country=XX"], serviceName: "c")
        #expect(throws: APIHealthConfiguration.Error.self) { try tagged.validate() }
        let none = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_COUNTRY_HEADER": ""], serviceName: "c")
        #expect(none.capture.countryHeader == nil)
    }

    /// The learner alone: a change is a change once; the same value again costs nothing; a value that is no
    /// country code is counted each time it comes after another value, and reported the first time.
    @Test func theLearnerChangesTheTagOncePerChange() {
        let base = [Point.Tag("instance", "i"), Point.Tag("service", "s")]
        let learner = CountryLearner(header: "CF-IPCountry", everyPointTags: base)
        #expect(
            learner.observe("BR")
                == .changed(
                    country: "BR",
                    everyPointTags: [
                        Point.Tag("country", "BR"), Point.Tag("instance", "i"), Point.Tag("service", "s"),
                    ]
                )
        )
        #expect(learner.observe("BR") == .unchanged)
        #expect(learner.observe("br") == .unchanged, "the same country in another case")
        #expect(learner.observe("XX") == .ignored(value: "XX", first: true))
        #expect(learner.observe("XX") == .unchanged)
        #expect(learner.observe("T1") == .ignored(value: "T1", first: false))
        #expect(learner.everyPointTags.contains(Point.Tag("country", "BR")), "an ignored value keeps the country")
        if case .changed(let country, _) = learner.observe("DE") { #expect(country == "DE") } else { Issue.record() }
        #expect(learner.ignored == 2)
        #expect(learner.everyPointTags.filter { $0.key == "country" } == [Point.Tag("country", "DE")])
    }

    /// The Apple platforms' hook reads the header as a response arrives, apart from the sample: the value
    /// goes through the intake to the record loop's learner, in order with the samples, and what it
    /// learns (the tags, the values ignored, the country to keep) is published for the health point,
    /// `metrics` and the spool worker.
    @Test func aHeaderSeenApartFromItsSampleTagsTheSamplesAfterIt() throws {
        var configuration = APIHealthConfiguration(serviceName: "country")
        configuration.spool = nil
        configuration.capture.countryHeader = "CF-IPCountry"
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "country"))
        let hook = CaptureRecorder(agent: agent)
        func response(_ country: String) -> HTTPURLResponse? {
            HTTPURLResponse(
                url: URL(string: "https://api.example.com/x")!,
                statusCode: 200,
                httpVersion: nil,
                headerFields: ["CF-IPCountry": country]
            )
        }
        func record() { agent.record(SchemaTests.sample("https://api.example.com/x")) }
        record()
        hook.observeCountry(in: response("BR"))
        record()
        hook.observeCountry(in: response("XX"))
        record()
        let countries = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
            .map { point in point.tags.first { $0.key == "country" }?.value ?? "-" }
        #expect(countries == ["-", "BR", "BR"])
        #expect(agent.metrics.countryValuesIgnored == 1)
        #expect(agent.everyPointTags.contains(Point.Tag("country", "BR")))
        #expect(agent.pending.publishedCountry?.country == "BR", "published for the spool worker to keep")
    }

    /// Real requests through an instrumented URLSession to a loopback API whose CDN header says where the
    /// client is: the points carry the country the server saw, from the response that said it on.
    @Test func urlSessionRequestsLearnTheCountryFromTheResponseHeader() async throws {
        let country = Locked("BR")
        let server = try await LoopbackHTTPServer.start { _ in
            .text(200, "ok", headers: [("CloudFront-Viewer-Country", country.withLock { $0 })])
        }
        var configuration = APIHealthConfiguration(serviceName: "country")
        configuration.spool = nil
        configuration.country = "US"
        configuration.capture.countryHeader = "cloudfront-viewer-country"
        // A point for every request: the country tag is read on each.
        configuration.capture.rawPoints = .all
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "country"))
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "api")
        let session = URLSession(configuration: sessionConfiguration)
        let url = URL(string: "\(server.baseURL)/items")!

        func countries() async -> [String] {
            agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
                .map { point in point.tags.first { $0.key == "country" }?.value ?? "-" }
        }
        // The configured country stands until a response says otherwise; the response that says so is the
        // first of the new country (the header is read before its sample is recorded).
        for _ in 0..<3 { _ = try await session.data(from: url) }
        #expect(await waitUntil { await countries().count == 3 })
        country.withLock { $0 = "XX" }
        for _ in 0..<2 { _ = try await session.data(from: url) }
        #expect(await waitUntil { await countries().count == 5 })
        country.withLock { $0 = "DE" }
        for _ in 0..<2 { _ = try await session.data(from: url) }
        #expect(await waitUntil { await countries().count == 7 })
        #expect(await countries() == ["BR", "BR", "BR", "BR", "BR", "DE", "DE"])
        #expect(agent.metrics.countryValuesIgnored == 1)

        // The interval points of the two countries are two series; the health point carries the last.
        _ = agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10)))
        let intervals = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        let counts = Dictionary(
            grouping: intervals,
            by: { point in point.tags.first { $0.key == "country" }?.value ?? "-" }
        ).mapValues { $0.reduce(0) { $0 + (Self.int($1, "count") ?? 0) } }
        #expect(counts == ["BR": 5, "DE": 2], "\(counts)")
        let health = AgentHealthPoint.make(
            agent.metrics,
            tags: agent.everyPointTags,
            configuration: agent.configuration
        )
        #expect(health.tags.contains(Point.Tag("country", "DE")))
        #expect(health.fields.contains(Point.Field("country_values_ignored", .uint(1))))
        await agent.shutdown(deadline: .seconds(5))
        try await server.shutdown()
    }

    /// The country the CDN saw is kept in the spool directory: a launch with no network (every request
    /// failing before any response) still tags its points with it, until a response says another.
    @Test func aRestartWithNoNetworkStillTagsTheLearnedCountry() async throws {
        let directory = temporaryDirectory("country-kept")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await LoopbackHTTPServer.start { _ in
            .text(200, "ok", headers: [("CloudFront-Viewer-Country", "BR")])
        }
        func makeAgent() throws -> APIHealthAgent {
            var configuration = APIHealthConfiguration(serviceName: "country")
            configuration.spool = SpoolOptions(directory: directory)
            configuration.capture.countryHeader = "CloudFront-Viewer-Country"
            configuration.capture.rawPoints = .all
            configuration.selfMetricsInterval = noPeriodicHealthPoint
            return try APIHealthAgent(configuration: configuration, logger: Logger(label: "country"))
        }
        // The first launch learns BR; its agent is let go (and the spool with it) as an app that exits.
        func firstLaunch() async throws {
            let first = try makeAgent()
            first.start()
            let online = URLSessionConfiguration.ephemeral
            first.instrument(online, module: "api")
            _ = try await URLSession(configuration: online).data(from: URL(string: "\(server.baseURL)/items")!)
            _ = first.metrics
            #expect(first.schema.everyPointTags.contains(Point.Tag("country", "BR")))
            await first.shutdown(deadline: .seconds(5))
        }
        try await firstLaunch()
        let port = server.port
        try await server.shutdown()
        let kept = try String(contentsOf: directory.appendingPathComponent(".country"), encoding: .utf8)
        #expect(kept == "BR")

        // The next launch, offline: the API's port refuses every connection.
        let second = try makeAgent()
        second.start()
        let offline = URLSessionConfiguration.ephemeral
        second.instrument(offline, module: "api")
        for _ in 0..<2 {
            _ = try? await URLSession(configuration: offline).data(
                from: URL(string: "http://127.0.0.1:\(port)/offline")!
            )
        }
        _ = second.metrics
        // The first launch's point, unsent, is in the spool too: the offline requests are the ones to read.
        let tagged = second.pendingPoints().filter {
            $0.measurement == PointSchema.Measurement.request && $0.tags.contains(Point.Tag("path", "/offline"))
        }
        #expect(tagged.count == 2)
        #expect(tagged.allSatisfy { $0.tags.contains(Point.Tag("country", "BR")) }, "\(tagged)")
        await second.shutdown(deadline: .seconds(1))
    }

    /// The kept country is a file the agent names, read as the spool's files are: a link, a file of
    /// another kind, a long file or one that is no country code is never a country.
    @Test func aKeptCountryThatIsNoCountryCodeIsIgnored() async throws {
        for (index, plant) in ["XX", "BRAZIL-AND-MORE", "link", "directory"].enumerated() {
            let directory = temporaryDirectory("country-planted-\(index)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let options = SpoolOptions(directory: directory)
            _ = try SpoolDirectory(options: options, precision: .ns)
            let file = directory.appendingPathComponent(".country")
            switch plant {
            case "link":
                let target = directory.appendingPathComponent("elsewhere")
                try Data("BR".utf8).write(to: target)
                try FileManager.default.createSymbolicLink(at: file, withDestinationURL: target)
            case "directory":
                try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
            default:
                try Data(plant.utf8).write(to: file)
            }
            var configuration = APIHealthConfiguration(serviceName: "country")
            configuration.spool = options
            configuration.capture.countryHeader = "CloudFront-Viewer-Country"
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "country"))
            #expect(!agent.schema.everyPointTags.contains { $0.key == "country" }, "\(plant)")
            // A new country replaces a link by a file of its own, never writing through the link.
            if plant == "link" {
                #expect(agent.spoolWorker.countryFile?.keepLearnedCountry("DE") == true)
                #expect(try String(contentsOf: directory.appendingPathComponent("elsewhere"), encoding: .utf8) == "BR")
                #expect(agent.spoolWorker.countryFile?.learnedCountry() == "DE")
            }
            await agent.shutdown(deadline: .seconds(1))
        }
    }

    static func int(_ point: Point, _ field: String) -> Int64? {
        switch point.fields.first(where: { $0.key == field })?.value {
        case .int(let value)?: value
        case .uint(let value)?: Int64(value)
        default: nil
        }
    }

    @Test func transportErrorsAreCountedByKindOnTheIntervalPoint() throws {
        let agent = try FleetSchemaTests.agent()
        func failed(_ code: Int, domain: String = "NSURLErrorDomain") -> RequestSample {
            var sample = FleetSchemaTests.sample(status: nil)
            sample.error = RequestSample.TransportError(domain: domain, code: code)
            return sample
        }
        for code in [-1003, -1006, -1004, -1004, -1004, -1009, -1018, -1020, -1200, -1202, -1001, -999, -999] {
            agent.record(failed(code))
        }
        agent.record(failed(61, domain: "NSPOSIXErrorDomain"))
        agent.record(FleetSchemaTests.sample(status: 503))
        _ = agent.recordIntervalPoints(endingAt: FleetSchemaTests.end)
        let intervals = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        let transport = try #require(intervals.first { $0.tags.contains(Point.Tag("status_class", "error")) })
        // The device offline, roaming off or not allowed data, and the cancelled requests: counted apart, in neither
        // count nor errors (no availability, burn rate or reachability counts them).
        #expect(Self.int(transport, "count") == 9 && Self.int(transport, "errors") == 9)
        #expect(Self.int(transport, "errors_device") == 3)
        #expect(Self.int(transport, "cancelled") == 2)
        #expect(Self.int(transport, "le_inf") == 9)
        #expect(Self.int(transport, "errors_dns") == 2)
        #expect(Self.int(transport, "errors_connect") == 3)
        #expect(Self.int(transport, "errors_tls") == 2)
        #expect(Self.int(transport, "errors_timeout") == 1)
        let server = try #require(intervals.first { $0.tags.contains(Point.Tag("status_class", "5xx")) })
        #expect(server.fields.allSatisfy { !PointSchema.transportErrorIntervalFields.contains($0.key) })
    }

    /// An interval whose only requests failed on the device: its point says so, and counts no request.
    @Test func anIntervalOfTheDevicesOwnFailuresCountsNoRequest() throws {
        let agent = try FleetSchemaTests.agent()
        var sample = FleetSchemaTests.sample(status: nil)
        sample.error = RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1009)
        for _ in 0..<200 { agent.record(sample) }
        _ = agent.recordIntervalPoints(endingAt: FleetSchemaTests.end)
        let intervals = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        #expect(intervals.count == 1)
        let offline = try #require(intervals.first)
        #expect(Self.int(offline, "count") == 0 && Self.int(offline, "errors") == 0)
        #expect(Self.int(offline, "errors_device") == 200 && Self.int(offline, "errors_connect") == nil)
        #expect(offline.fields.first { $0.key == "duration_ms_min" }?.value == .float(0))
    }

    /// A real refused connection, through URLSession: the kind corelibs reports is the one counted.
    @Test func aRefusedConnectionCountsAsAConnectError() async throws {
        let down = try RefusingPort()
        var configuration = APIHealthConfiguration(serviceName: "country")
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "country"))
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "api")
        let session = URLSession(configuration: sessionConfiguration)
        _ = try? await session.data(from: URL(string: "http://127.0.0.1:\(down.port)/items")!)
        #expect(await waitUntil { agent.metrics.pointsRecorded >= 1 })
        _ = agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10)))
        let interval = agent.pendingPoints().first { $0.measurement == PointSchema.Measurement.requestInterval }
        #expect(interval.flatMap { Self.int($0, "errors_connect") } == 1, "\(String(describing: interval))")
        await agent.shutdown(deadline: .seconds(5))
    }
}
