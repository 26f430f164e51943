import APIHealthTestKit
import Foundation
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Told, per country, live and end to end: three installs of one service, in BR, DE and US, call the same
/// upstream through instrumented URLSessions and ship to a real VictoriaMetrics; vmalert evaluates the shipped
/// recording and alert rules (sped up as ``AlertNotificationTests/fastRules(in:)`` says) and notifies a real
/// Alertmanager running the shipped configuration, which posts to a webhook receiver. The upstream refuses BR's
/// connections: exactly one grouped notification arrives, naming BR, the host and the failing kind, and nothing
/// for DE or US; BR's connections come back: the resolved notice arrives. No objective is declared anywhere.
@Suite struct CountryOutageTests {
    /// The shipped Alertmanager configuration, its waits shortened so the test takes seconds: a group's first
    /// notice after 1 s (pages) or 5 s (tickets, so a page has arrived to inhibit them), its changes every 2 s.
    static func fastAlertmanagerConfig(webhook: URL) throws -> String {
        let shipped = try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent("alerts/alertmanager.yml"),
            encoding: .utf8
        )
        var fast = AlertmanagerProcess.config(shipped, webhook: webhook)
        for (from, to) in [
            ("group_wait: 30s", "group_wait: 5s"), ("group_wait: 10s", "group_wait: 1s"),
            ("group_interval: 5m", "group_interval: 2s"),
        ] {
            #expect(fast.contains(from), "the shipped configuration's shape changed: \(from)")
            fast = fast.replacingOccurrences(of: from, with: to)
        }
        return fast
    }

    /// One install: an agent tagged with its country, shipping to `victoria`, recording every request's URL as the
    /// upstream's (the outage sends BR's requests to a port that refuses them, as a route from there would).
    final class Install: Sendable {
        let country: String
        let agent: APIHealthAgent
        let session: URLSession

        init(country: String, victoria: URL, refusedPort: Int, upstreamPort: Int) throws {
            self.country = country
            var configuration = APIHealthConfiguration(serviceName: "checkout")
            configuration.spool = nil
            configuration.country = country
            configuration.instance = "install-\(country.lowercased())"
            configuration.aggregation?.interval = .seconds(1)
            configuration.batching.flushDelay = .milliseconds(100)
            configuration.destination = InfluxDestination(url: victoria, api: .v2(organization: "", bucket: ""))
            configuration.capture.filter = { sample, _ in
                var recorded = sample
                let text = sample.url.absoluteString
                recorded.url = URL(
                    string: text.replacingOccurrences(of: ":\(refusedPort)/", with: ":\(upstreamPort)/")
                )!
                return recorded
            }
            agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "install-\(country)"))
            agent.start()
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            sessionConfiguration.timeoutIntervalForRequest = 30
            agent.instrument(sessionConfiguration, module: "catalog")
            session = URLSession(configuration: sessionConfiguration)
        }

        /// `count` requests to `url`, eight at a time; returns how many failed.
        func requests(_ count: Int, to url: URL) async -> Int {
            await withTaskGroup(of: Bool.self) { group in
                var failed = 0
                var started = 0
                for _ in 0..<min(8, count) {
                    group.addTask { (try? await self.session.data(from: url)) == nil }
                    started += 1
                }
                for await didFail in group {
                    if didFail { failed += 1 }
                    if started < count {
                        group.addTask { (try? await self.session.data(from: url)) == nil }
                        started += 1
                    }
                }
                return failed
            }
        }
    }

    @Test func anUpstreamUnreachableFromOneCountryNotifiesOnceNamingItAndResolves() async throws {
        let victoria = try await VictoriaProcess.victoriaMetrics()
        defer { victoria.stop() }
        let upstream = try await LoopbackHTTPServer.start { _ in .json(200, #"{"items":[]}"#) }
        let refused = try RefusingPort()
        let receiver = try await AlertWebhookReceiver.start()
        let alertmanager = try await AlertmanagerProcess.start(
            config: try Self.fastAlertmanagerConfig(webhook: receiver.url)
        )
        defer { alertmanager.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let vmalert = try Child(
            try VictoriaProcess.path(of: "vmalert"),
            try AlertNotificationTests.fastRules(in: directory).map { "-rule=\($0.path)" } + [
                "-datasource.url=\(victoria.url.absoluteString)", "-remoteWrite.url=\(victoria.url.absoluteString)",
                "-remoteWrite.flushInterval=200ms", "-notifier.url=\(alertmanager.url.absoluteString)",
                "-evaluationInterval=1s", "-httpListenAddr=127.0.0.1:\(try VictoriaProcess.freePort())",
                "-loggerLevel=ERROR",
            ]
        )
        let installs = try ["BR", "DE", "US"].map {
            try Install(country: $0, victoria: victoria.url, refusedPort: refused.port, upstreamPort: upstream.port)
        }
        func stopEverything() async {
            vmalert.signal(SIGTERM)
            vmalert.process.waitUntilExit()
            for install in installs { await install.agent.shutdown(deadline: .seconds(5)) }
            try? await upstream.shutdown()
            try? await receiver.shutdown()
        }
        let host = "127.0.0.1:\(upstream.port)"
        let working = URL(string: "http://\(host)/v1/items")!
        let unreachable = URL(string: "http://127.0.0.1:\(refused.port)/v1/items")!
        func reachability(_ notification: AlertWebhookReceiver.Notification) -> Bool {
            notification.groupLabels["alertname"]?.hasPrefix("APIHealthReachability") == true
        }

        // The outage: BR's connections are refused, DE and US are served. 15 requests each: above the fast rules'
        // minimum of 10, and under the 20 failures the steadily-failing ticket needs.
        let outageStart = ContinuousClock.now
        let failures = await withTaskGroup(of: (String, Int).self) { group in
            for install in installs {
                group.addTask {
                    (install.country, await install.requests(15, to: install.country == "BR" ? unreachable : working))
                }
            }
            return await group.reduce(into: [String: Int]()) { $0[$1.0] = $1.1 }
        }
        #expect(failures == ["BR": 15, "DE": 0, "US": 0])
        let notified = await waitUntil(timeout: .seconds(180)) {
            receiver.notifications.contains { reachability($0) && $0.status == "firing" }
        }
        let timeToNotice = ContinuousClock.now - outageStart
        guard notified else {
            await stopEverything()
            Issue.record("no notification within 180 s: \(vmalert.stderr)\n\(alertmanager.log)")
            return
        }
        print("CountryOutageTests: notified \(timeToNotice) after BR's first refused request")
        let notice = try #require(receiver.notifications.first { reachability($0) })
        #expect(notice.path == "/apihealth/page")
        #expect(
            notice.groupLabels == [
                "alertname": "APIHealthReachabilityTransportErrors", "host": host, "country": "BR",
            ],
            "\(notice.groupLabels)"
        )
        #expect(notice.alerts.count == 1, "one notice for the outage: \(notice.alerts.map(\.labels))")
        let alert = try #require(notice.alerts.first)
        #expect(alert.labels["service"] == "checkout" && alert.labels["severity"] == "page", "\(alert.labels)")
        #expect(alert.labels["instance"] == nil && alert.labels["path"] == nil, "per host, not per install or path")
        #expect(alert.annotations["summary"]?.contains("\(host) unreachable from country=BR") == true, "\(alert)")
        #expect(alert.annotations["share_here"] == "100%", "\(alert.annotations)")
        #expect(alert.annotations["share_elsewhere"] == "0%", "\(alert.annotations)")
        #expect(alert.annotations["failing_kind"]?.hasPrefix("connect (15 ") == true, "\(alert.annotations)")

        // BR's connections come back: enough successes that its share of failures falls under 5 %.
        #expect(await installs[0].requests(400, to: working) == 0)
        let recoveredAt = ContinuousClock.now
        let resolved = await waitUntil(timeout: .seconds(180)) {
            receiver.notifications.contains { reachability($0) && $0.status == "resolved" }
        }
        print("CountryOutageTests: resolved \(ContinuousClock.now - recoveredAt) after BR's connections came back")
        #expect(resolved, "the resolved notice: \(vmalert.stderr)")
        await stopEverything()

        let notifications = receiver.notifications
        let firing = notifications.filter { $0.status == "firing" }
        #expect(firing.count == 1, "exactly one notification while BR was cut off: \(firing.map(\.groupLabels))")
        for notification in notifications {
            for alert in notification.alerts {
                #expect(alert.labels["country"] == "BR", "nothing for DE or US: \(alert.labels)")
            }
        }
        #expect(
            notifications.last { reachability($0) }?.groupLabels["country"] == "BR",
            "the resolved notice names the country"
        )
    }
}
