import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Benchmarking) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `capture.successRules`: which statuses count as a success, per host, path template and method.
@Suite(.serialized) struct SuccessRuleTests {
    private func decide(
        _ rules: [SuccessRule],
        _ url: String,
        path: String,
        method: String = "GET",
        status: Int?
    ) -> Bool {
        SuccessPolicy(rules).succeeds(url: URL(string: url)!, path: path, method: method, statusCode: status)
    }

    @Test func theFirstRuleThatMatchesHostPathMethodAndStatusDecides() {
        let rules: [SuccessRule] = [
            .success(404, host: "api.example.com", path: "/users/{id}"),
            .success(401, path: "/oauth/*"),
            .failure(200...299, host: "*.legacy.example.com", path: "/jobs/**", method: "POST"),
            .failure(404),
            .success(400...499),
        ]
        let api = "https://api.example.com/users/7"
        #expect(decide(rules, api, path: "/users/{id}", status: 404))
        #expect(!decide(rules, "https://other.example.com/users/7", path: "/users/{id}", status: 404), "another host")
        #expect(!decide(rules, api, path: "/users/{id}/orders", status: 404), "another path")
        #expect(decide(rules, "https://auth.example.com/oauth/probe", path: "/oauth/probe", status: 401))
        #expect(
            decide(rules, "https://auth.example.com/oauth/probe/x", path: "/oauth/probe/x", status: 401) == true,
            "past the rule's segments the catch-all 4xx rule decides"
        )
        let job = "https://eu.legacy.example.com/jobs/7/run"
        #expect(!decide(rules, job, path: "/jobs/{id}/run", method: "POST", status: 202))
        #expect(decide(rules, job, path: "/jobs/{id}/run", method: "GET", status: 202), "another method")
        #expect(
            decide(rules, "https://legacy.example.com/jobs/7", path: "/jobs/{id}", method: "POST", status: 202),
            "*.legacy.example.com names its subdomains only"
        )
        #expect(!decide(rules, "https://x.example.com/", path: "/", status: 404), "the earlier rule wins")
        #expect(decide(rules, "https://x.example.com/", path: "/", status: 418))
        #expect(!decide(rules, "https://x.example.com/", path: "/", status: 500), "no rule: 5xx fails")
        #expect(decide(rules, "https://x.example.com/", path: "/", status: 302), "no rule: 3xx succeeds")
    }

    @Test func aTransportErrorAlwaysFails() {
        #expect(
            !decide(
                [SuccessRule(statuses: [0...999], succeeds: true)],
                "https://a.example.com/",
                path: "/",
                status: nil
            )
        )
        #expect(!decide([], "https://a.example.com/", path: "/", status: nil))
    }

    @Test func aHostRuleWithAPortNamesThatPortOnly() {
        let rules: [SuccessRule] = [.success(404, host: "api.example.com:8443")]
        #expect(decide(rules, "https://api.example.com:8443/x", path: "/x", status: 404))
        #expect(!decide(rules, "https://api.example.com/x", path: "/x", status: 404))
        #expect(
            decide([.success(404, host: "API.example.com:443")], "https://api.example.com/x", path: "/x", status: 404),
            "the scheme's port, any case"
        )
    }

    @Test func rulesThatCannotMatchAreRefusedAtStart() {
        for rule: SuccessRule in [
            SuccessRule(statuses: [], succeeds: true), .success(404, host: "api.example.com/users"),
            .success(404, path: "users/{id}"), .success(404, host: "api.example.com:port"),
        ] {
            var configuration = APIHealthConfiguration(serviceName: "rules")
            configuration.capture.successRules = [rule]
            #expect(throws: APIHealthConfiguration.Error.self, "\(rule)") { try configuration.validate() }
        }
    }

    /// On real sockets: a 404 the rules call a success is written with `success` 1 and `errors` 0 for its
    /// host and path template, while the same status elsewhere, and other statuses there, still fail.
    @Test func aStatusTheRulesCallASuccessIsWrittenAsOneForItsEndpointOnly() async throws {
        let harness = try await CaptureHarness {
            $0.capture.successRules = [
                .success(404, host: "127.0.0.1", path: "/status/{id}"),
                .failure(200, path: "/ok", method: "GET"),
            ]
        }
        let port = harness.server.port
        let requests = [
            "http://127.0.0.1:\(port)/status/404", "http://127.0.0.1:\(port)/status/503",
            "http://127.0.0.1:\(port)/nothing/here", "http://localhost:\(port)/status/404",
            "http://127.0.0.1:\(port)/ok",
        ]
        for url in requests {
            _ = try await harness.instrumented.data(for: URLRequest(url: URL(string: url)!))
        }
        let points = try await harness.waitForRequests(requests.count)
        func outcome(_ host: String, _ path: String, _ status: String) -> (success: FieldValue?, errors: FieldValue?) {
            let point = points.first { $0.tag("host") == host && $0.tag("path") == path && $0.tag("status") == status }
            return (point?.field("success"), point?.field("errors"))
        }
        let local = "127.0.0.1:\(port)"
        #expect(outcome(local, "/status/{id}", "404") == (.bool(true), .int(0)))
        #expect(outcome(local, "/status/{id}", "503") == (.bool(false), .int(1)))
        #expect(outcome(local, "/nothing/here", "404") == (.bool(false), .int(1)))
        #expect(outcome("localhost:\(port)", "/status/{id}", "404") == (.bool(false), .int(1)))
        #expect(outcome(local, "/ok", "200") == (.bool(false), .int(1)))
        await harness.close()
    }

    /// The interval aggregate reads the same decision from the series: a 404 the rules call a success is
    /// no error there either, and `errors-and-slow` does not write it as a failure.
    @Test func intervalAggregatesAndRawPointsFollowTheRules() throws {
        var configuration = APIHealthConfiguration(serviceName: "rules")
        configuration.spool = nil
        configuration.capture.rawPoints = .errorsAndSlow(slowerThan: .seconds(10), sampleRate: 0)
        configuration.capture.successRules = [.success(404, path: "/users/{id}")]
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "rules"))
        for (index, (path, status)) in [("/users/1", 404), ("/users/2", 404), ("/orders/3", 404)].enumerated() {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.example.com\(path)")!,
                    module: "m",
                    startedAt: Date(timeIntervalSince1970: 1_763_800_000 + Double(index)),
                    duration: .milliseconds(5),
                    statusCode: status
                )
            )
        }
        #expect(agent.recordIntervalPoints(endingAt: Timestamp(seconds: 1_763_800_010)))
        let points = agent.pendingPoints()
        let raw = points.filter { $0.measurement == PointSchema.Measurement.request }
        #expect(raw.map { $0.tag("path") } == ["/orders/{id}"], "only the failure is written raw")
        let intervals = points.filter { $0.measurement == PointSchema.Measurement.requestInterval }
        func errors(_ path: String) -> FieldValue? {
            intervals.first { $0.tag("path") == path }?.field("errors")
        }
        #expect(errors("/users/{id}") == .int(0))
        #expect(errors("/orders/{id}") == .int(1))
    }

    /// A URL not seen before takes its endpoint's series when one was rendered (no URL parsed again);
    /// the rules read the URL's scheme and port, so a request to the same endpoint over another scheme or
    /// port is judged on its own.
    @Test func aNewURLOfAKnownEndpointIsJudgedByItsOwnSchemeAndPort() throws {
        var configuration = APIHealthConfiguration(serviceName: "rules")
        configuration.spool = nil
        configuration.capture.successRules = [.success(404, host: "api.example.com:443")]
        // A point for every request: each one's success field is read.
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "rules"))
        let urls = [
            "https://api.example.com/users/1", "https://api.example.com/users/2", "http://api.example.com/users/3",
            "https://api.example.com:8443/users/4", "https://api.example.com:443/users/5",
            "HTTPS://api.example.com/users/6",
        ]
        for (index, url) in urls.enumerated() {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: url)!,
                    module: "m",
                    startedAt: Date(timeIntervalSince1970: 1_763_800_000 + Double(index)),
                    duration: .milliseconds(5),
                    statusCode: 404
                )
            )
        }
        let raw = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
        #expect(raw.count == urls.count)
        #expect(
            raw.map { $0.field("success") } == [true, true, false, false, true, true].map { FieldValue.bool($0) },
            "\(raw.map { $0.field("success") })"
        )
    }

    @Test func aRequestThatNeverGotAStatusFailsWhateverTheRules() async throws {
        let down = try RefusingPort()
        let harness = try await CaptureHarness { $0.capture.successRules = [.success(100...599)] }
        _ = await observe(harness.instrumented, URLRequest(url: URL(string: "http://127.0.0.1:\(down.port)/x")!))
        let point = try #require(try await harness.waitForRequests(1).first)
        #expect(point.tag("status") == "error")
        #expect(point.field("success") == .bool(false))
        #expect(point.field("errors") == .int(1))
        await harness.close()
    }
}
