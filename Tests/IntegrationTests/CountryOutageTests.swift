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

        init(country: String, victoria: URL, refusedPort: Int, upstreamPort: Int, availability: Double?) throws {
            self.country = country
            var configuration = APIHealthConfiguration(serviceName: "checkout")
            configuration.spool = nil
            configuration.country = country
            configuration.instance = "install-\(country.lowercased())"
            if let availability { configuration.objectives.default.availability = availability }
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

    /// What the webhook receiver got while some countries could not reach the upstream and after they could again.
    struct Outage {
        var host: String
        /// Notifications received before the recovery began.
        var during: [AlertWebhookReceiver.Notification]
        /// Every notification, the resolved one included.
        var all: [AlertWebhookReceiver.Notification]
        /// The alerts Alertmanager held back (inhibited) during the outage, by name.
        var suppressed: Set<String>
    }

    /// Runs three installs (BR, DE, US) against the stack, with an `availability` objective if given; those in
    /// `failing` send 15 requests each to a port that refuses them, the others 15 to the upstream; once the
    /// reachability notice has come (`firingAlerts` alerts in it), every failing install sends 400 requests that
    /// succeed, and the resolved notice is awaited. The page route waits `pageGroupWait` for a group's
    /// other alerts.
    static func outage(
        failing: Set<String>,
        firingAlerts: Int,
        pageGroupWait: String,
        availability: Double? = nil
    ) async throws -> Outage? {
        let victoria = try await VictoriaProcess.victoriaMetrics()
        defer { victoria.stop() }
        let upstream = try await LoopbackHTTPServer.start { _ in .json(200, #"{"items":[]}"#) }
        let refused = try RefusingPort()
        let receiver = try await AlertWebhookReceiver.start()
        let config = try Self.fastAlertmanagerConfig(webhook: receiver.url)
            .replacingOccurrences(of: "group_wait: 1s", with: "group_wait: \(pageGroupWait)")
        let alertmanager = try await AlertmanagerProcess.start(config: config)
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
            try Install(
                country: $0,
                victoria: victoria.url,
                refusedPort: refused.port,
                upstreamPort: upstream.port,
                availability: availability
            )
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

        // The outage: 15 requests each, above the fast rules' minimum of 10, and under the 20 failures the
        // steadily-failing ticket needs.
        let outageStart = ContinuousClock.now
        let failures = await withTaskGroup(of: (String, Int).self) { group in
            for install in installs {
                group.addTask {
                    let url = failing.contains(install.country) ? unreachable : working
                    return (install.country, await install.requests(15, to: url))
                }
            }
            return await group.reduce(into: [String: Int]()) { $0[$1.0] = $1.1 }
        }
        #expect(
            failures
                == Dictionary(
                    uniqueKeysWithValues: installs.map { ($0.country, failing.contains($0.country) ? 15 : 0) }
                )
        )
        let notified = await waitUntil(timeout: .seconds(180)) {
            receiver.notifications.contains {
                reachability($0) && $0.status == "firing" && $0.alerts.count >= firingAlerts
            }
        }
        guard notified else {
            await stopEverything()
            Issue.record(
                "no notification within 180 s: \(receiver.notifications) \(vmalert.stderr)\n\(alertmanager.log)"
            )
            return nil
        }
        print(
            "CountryOutageTests: \(failing.sorted()) notified \(ContinuousClock.now - outageStart) after the first refused request"
        )
        let during = receiver.notifications
        // With an objective, the burn-rate page of the failing place fires too: it reaches Alertmanager, which holds
        // it back.
        var suppressed = Set<String>()
        if availability != nil {
            _ = await waitUntil(timeout: .seconds(120)) {
                let held = (try? await alertmanager.alerts()) ?? []
                suppressed = Set(held.filter { $0.state == "suppressed" }.compactMap { $0.labels["alertname"] })
                return suppressed.contains("APIHealthAvailabilityBurnPage")
            }
        }

        // The connections come back: enough successes that each place's share of failures falls under 5 %.
        let recoveredAt = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for install in installs where failing.contains(install.country) {
                group.addTask { #expect(await install.requests(400, to: working) == 0) }
            }
        }
        let resolved = await waitUntil(timeout: .seconds(180)) {
            receiver.notifications.contains { reachability($0) && $0.status == "resolved" }
        }
        print("CountryOutageTests: resolved \(ContinuousClock.now - recoveredAt) after the connections came back")
        #expect(resolved, "the resolved notice: \(vmalert.stderr)")
        await stopEverything()
        return Outage(host: host, during: during, all: receiver.notifications, suppressed: suppressed)
    }

    @Test func anUpstreamUnreachableFromOneCountryNotifiesOnceNamingItAndResolves() async throws {
        guard let outage = try await Self.outage(failing: ["BR"], firingAlerts: 1, pageGroupWait: "1s") else { return }
        let host = outage.host
        #expect(
            outage.during.count == 1,
            "exactly one notification while BR was cut off: \(outage.during.map(\.groupLabels))"
        )
        let notice = try #require(outage.during.first)
        #expect(notice.path == "/apihealth/page")
        #expect(
            notice.groupLabels == [
                "alertname": "APIHealthReachabilityTransportErrors", "host": host, "service": "checkout",
            ],
            "\(notice.groupLabels)"
        )
        #expect(notice.alerts.count == 1, "one notice for the outage: \(notice.alerts.map(\.labels))")
        let alert = try #require(notice.alerts.first)
        #expect(alert.labels["country"] == "BR" && alert.labels["severity"] == "page", "\(alert.labels)")
        #expect(alert.labels["instance"] == nil && alert.labels["path"] == nil, "per host, not per install or path")
        #expect(
            alert.annotations["summary"]
                == "checkout cannot reach \(host) from country BR: 100% of requests get no response",
            "\(alert)"
        )
        #expect(alert.annotations["share_here"] == "100%", "\(alert.annotations)")
        #expect(alert.annotations["share_elsewhere"] == "0%", "\(alert.annotations)")
        #expect(alert.annotations["counts"] == "15 failed of 15 requests", "\(alert.annotations)")
        #expect(alert.annotations["failing_kind"]?.hasPrefix("connect (15 ") == true, "\(alert.annotations)")
        #expect(alert.annotations["places_failing"] == "country BR (100%); ", "\(alert.annotations)")
        #expect(alert.annotations["runbook_url"]?.hasSuffix("#A-host-unreachable-from-a-place") == true)
        #expect(
            alert.annotations["dashboard"]?.contains(
                "&var-host=127.0.0.1%3A\(host.split(separator: ":")[1])&var-country=BR"
            )
                == true,
            "\(alert.annotations)"
        )

        let firing = outage.all.filter { $0.status == "firing" }
        #expect(firing.count == 1, "exactly one notification while BR was cut off: \(firing.map(\.groupLabels))")
        for notification in outage.all {
            for alert in notification.alerts {
                #expect(alert.labels["country"] == "BR", "nothing for DE or US: \(alert.labels)")
            }
        }
        #expect(outage.all.last?.status == "resolved", "the resolved notice comes last")
    }

    /// BR cut off from an endpoint with a 99.9 % objective: its burn-rate page fires beside the reachability page, and
    /// is held back by it (the same host and place): one notification while BR is cut off. The page route waits the
    /// shipped 10 s, so a burn-rate page sent before the reachability page came would be at the receiver before the
    /// reachability notice. The recovery is compressed into seconds here, where the reachability page clears before
    /// the burn rates fall (in real time the burn-rate page's 5-minute window clears first): only the notices while BR
    /// is cut off are counted.
    @Test func aCountryOutageOfAnEndpointWithAnObjectiveIsStillOneNotification() async throws {
        guard
            let outage = try await Self.outage(
                failing: ["BR"],
                firingAlerts: 1,
                pageGroupWait: "10s",
                availability: 0.999
            )
        else { return }
        #expect(
            outage.suppressed.contains("APIHealthAvailabilityBurnPage"),
            "the burn-rate page fired and was held back"
        )
        let names = outage.during.flatMap { $0.alerts.map { $0.labels["alertname"] ?? "" } }
        #expect(names == ["APIHealthReachabilityTransportErrors"], "\(outage.during.map(\.groupLabels))")
    }

    /// Every country cut off: three reachability pages (each place fails outright, with no place to compare with),
    /// one notification listing BR, DE and US, then one resolved. The page route waits 20 s for the group's other
    /// alerts, as the shipped 10 s does for alerts a minute apart.
    @Test func anUpstreamUnreachableFromEveryCountryNotifiesOnceListingThemAndResolves() async throws {
        guard let outage = try await Self.outage(failing: ["BR", "DE", "US"], firingAlerts: 3, pageGroupWait: "20s")
        else { return }
        #expect(outage.during.count == 1, "one notification for the host: \(outage.during.map(\.groupLabels))")
        let notice = try #require(outage.during.first)
        #expect(notice.groupLabels["host"] == outage.host && notice.groupLabels["country"] == nil)
        #expect(Set(notice.alerts.compactMap { $0.labels["country"] }) == ["BR", "DE", "US"], "\(notice.alerts)")
        #expect(notice.alerts.allSatisfy { $0.annotations["share_here"] == "100%" }, "\(notice.alerts)")
        #expect(
            notice.alerts.allSatisfy { $0.annotations["share_elsewhere"] == "100%" },
            "the rest of the host fails too: \(notice.alerts.map(\.annotations))"
        )
        let resolved = outage.all.filter { $0.status == "resolved" }
        #expect(resolved.count == 1, "\(outage.all.map(\.status))")
        #expect(resolved.first.map { Set($0.alerts.compactMap { $0.labels["country"] }) } == ["BR", "DE", "US"])
    }
}
