import APIHealthTestKit
import Foundation
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The shipped rules, live: an agent ships a real upstream's requests to a real VictoriaMetrics while
/// vmalert evaluates the rule file and posts to a loopback Alertmanager receiver (`POST /api/v2/alerts`).
/// The upstream fails, the page arrives for its endpoint with the labels and words the rules promise; the
/// upstream recovers, the resolved notice (an `endsAt` in the past) arrives.
@Suite struct AlertNotificationTests {
    /// The shipped rule files with their groups evaluated every second and no `for` wait, so the test takes
    /// seconds, not the minutes the shipped files wait before paging, and with the minimum-traffic guard lowered
    /// from 100 requests to 10, so ten failed requests page and a few thousand successes resolve it, and the failing
    /// installs needed from 3 to 1 (each test install is one agent; the replays test the installs). Otherwise the
    /// expressions are the shipped ones.
    static func fastRules(in directory: URL) throws -> [URL] {
        try AlertRulesTests.ruleFiles().map { shipped in
            var fast = try String(contentsOf: shipped, encoding: .utf8)
            for interval in ["1m", "5m", "15m"] {
                fast = fast.replacingOccurrences(of: #"interval: "\#(interval)""#, with: #"interval: "1s""#)
            }
            for wait in ["2m", "5m", "15m"] {
                fast = fast.replacingOccurrences(of: #"for: "\#(wait)""#, with: #"for: "0s""#)
            }
            #expect(fast.contains(#"interval: "1s""#) && !fast.contains(#"for: "2m""#), "the rule file's shape changed")
            if shipped == AlertRulesTests.alertRules {
                #expect(fast.contains(">= 100\n") && fast.contains(">= 3\n"), "the guards' shape changed")
                fast = fast.replacingOccurrences(of: ">= 100\n", with: ">= 10\n")
                fast = fast.replacingOccurrences(of: ">= 3\n", with: ">= 1\n")
            }
            let file = directory.appendingPathComponent("fast.\(shipped.lastPathComponent)")
            try fast.write(to: file, atomically: true, encoding: .utf8)
            return file
        }
    }

    /// One notification as the receiver got it.
    struct Notice {
        var labels: [String: String]
        var annotations: [String: String]
        var endsAt: Date
        var receivedAt: Date
        var isResolved: Bool { endsAt <= receivedAt }
    }

    static func notices(in body: [UInt8], receivedAt: Date) -> [Notice] {
        guard let alerts = (try? JSONSerialization.jsonObject(with: Data(body))) as? [[String: Any]] else { return [] }
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        return alerts.compactMap { alert in
            guard let labels = alert["labels"] as? [String: String], let ends = alert["endsAt"] as? String,
                let endsAt = format.date(from: ends) ?? plain.date(from: ends)
            else { return nil }
            return Notice(
                labels: labels,
                annotations: alert["annotations"] as? [String: String] ?? [:],
                endsAt: endsAt,
                receivedAt: receivedAt
            )
        }
    }

    @Test func aFailingUpstreamPagesWithItsEndpointAndRegionAndItsRecoveryResolves() async throws {
        let victoria = try await VictoriaProcess.victoriaMetrics()
        defer { victoria.stop() }
        let failing = Locked(true)
        let upstream = try await LoopbackHTTPServer.start { _ in
            failing.withLock { $0 } ? .text(503, "down") : .text(200, "ok")
        }
        let received = Locked<[Notice]>([])
        let receiver = try await LoopbackHTTPServer.start { request in
            if request.method == "POST" && request.path == "/api/v2/alerts" {
                let notices = Self.notices(in: request.body, receivedAt: Date())
                received.withLock { $0 += notices }
            }
            return .text(200, "")
        }

        var configuration = APIHealthConfiguration(serviceName: "live-alerts")
        configuration.spool = nil
        configuration.globalTags = ["region": "eu-west"]
        configuration.objectives.default.availability = 0.999
        configuration.aggregation?.interval = .seconds(1)
        configuration.batching.flushDelay = .milliseconds(100)
        configuration.destination = InfluxDestination(url: victoria.url, api: .v2(organization: "", bucket: ""))
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "live-alerts"))
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "payments")
        let session = URLSession(configuration: sessionConfiguration)
        let charges = URL(string: "\(upstream.baseURL)/v1/charges")!

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("alerts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let vmalert = try Child(
            try VictoriaProcess.path(of: "vmalert"),
            try Self.fastRules(in: directory).map { "-rule=\($0.path)" } + [
                "-datasource.url=\(victoria.url.absoluteString)", "-remoteWrite.url=\(victoria.url.absoluteString)",
                "-remoteWrite.flushInterval=200ms", "-notifier.url=\(receiver.baseURL)", "-evaluationInterval=1s",
                "-httpListenAddr=127.0.0.1:\(try VictoriaProcess.freePort())", "-loggerLevel=ERROR",
            ]
        )
        func stopEverything() async {
            vmalert.signal(SIGTERM)
            vmalert.process.waitUntilExit()
            await agent.shutdown(deadline: .seconds(5))
            try? await upstream.shutdown()
            try? await receiver.shutdown()
            try? FileManager.default.removeItem(at: directory)
        }

        func isPage(_ notice: Notice) -> Bool {
            notice.labels["alertname"] == "APIHealthAvailabilityBurnPage" && notice.labels["path"] == "/v1/charges"
        }
        // The upstream fails: ten requests, every one refused with a 503.
        let failingSince = ContinuousClock.now
        for _ in 0..<10 { _ = try? await session.data(from: charges) }
        let paged = await waitUntil(timeout: .seconds(120)) {
            try? await VictoriaMetrics(base: victoria.url).forceFlush()
            return received.withLock { $0.contains { isPage($0) && !$0.isResolved } }
        }
        let timeToPage = ContinuousClock.now - failingSince
        guard paged, let page = received.withLock({ $0.first { isPage($0) && !$0.isResolved } }) else {
            await stopEverything()
            Issue.record("no page within 120 s: \(vmalert.stderr)")
            return
        }
        print("AlertNotificationTests: page \(timeToPage) after the upstream began to fail")
        let host = "127.0.0.1:\(upstream.port)"
        #expect(
            page.labels.filter { $0.key != "alertgroup" } == [
                "alertname": "APIHealthAvailabilityBurnPage", "host": host, "path": "/v1/charges", "method": "GET",
                "module": "payments", "service": "live-alerts", "severity": "page", "region": "eu-west",
            ],
            "\(page.labels)"
        )
        let description = page.annotations["description"] ?? ""
        #expect(description.hasPrefix("Page:") && description.contains("from region eu-west"), "\(description)")
        #expect(description.contains("availability objective"), "\(description)")
        #expect((Double(page.annotations["burn_rate"] ?? "") ?? 0) > 14.4, "\(page.annotations)")

        // The upstream recovers: enough successes that every window's error share falls below what pages
        // (10 failures in 4,000 requests: a burn rate of 2.5, under 6 and 14.4).
        failing.withLock { $0 = false }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<500 { _ = try await session.data(from: charges) } }
            }
            try await group.waitForAll()
        }
        let recoveredAt = ContinuousClock.now
        let resolved = await waitUntil(timeout: .seconds(120)) {
            try? await VictoriaMetrics(base: victoria.url).forceFlush()
            return received.withLock { $0.contains { isPage($0) && $0.isResolved } }
        }
        print("AlertNotificationTests: resolved \(ContinuousClock.now - recoveredAt) after the upstream recovered")
        #expect(resolved, "the page is resolved once the upstream recovers: \(vmalert.stderr)")
        await stopEverything()
    }
}
