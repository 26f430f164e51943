import Foundation
import TestSupport
import Testing

/// The shipped Alertmanager configuration (dashboards/alerts/alertmanager.yml), on Debian's Alertmanager and its
/// `amtool`: the file passes the check, each severity reaches its receiver, and a real Alertmanager started with it
/// groups one outage into one notice per alert, host and country and holds back the ticket a page already says.
@Suite struct AlertDeliveryTests {
    static let shipped = AlertRulesTests.alerts.appendingPathComponent("alertmanager.yml")

    @Test func theShippedConfigurationPassesAmtoolsCheck() async throws {
        let result = try await AlertmanagerProcess.amtool(["check-config", Self.shipped.path])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("SUCCESS"), "\(result.stdout)")
        // The check reads the routes: a route to a receiver that does not exist fails it.
        let broken = try String(contentsOf: Self.shipped, encoding: .utf8)
            .replacingOccurrences(of: "receiver: apihealth-page", with: "receiver: nobody")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("amtool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let copy = folder.appendingPathComponent("alertmanager.yml")
        try Data(broken.utf8).write(to: copy)
        let failed = try await AlertmanagerProcess.amtool(["check-config", copy.path])
        #expect(failed.status != 0, "a route to a missing receiver fails the check")
    }

    /// Every route of the shipped file, as `amtool config routes test` reads it: a reachability page, another page, a
    /// ticket, and an alert without a severity (the default route).
    @Test(arguments: [
        ("APIHealthReachabilityTransportErrors", "page", "apihealth-page"),
        ("APIHealthReachabilityServerErrors", "page", "apihealth-page"),
        ("APIHealthAvailabilityBurnPage", "page", "apihealth-page"),
        ("APIHealthEndpointFailingSteadily", "ticket", "apihealth-ticket"),
        ("APIHealthAgentStoppedReporting", "", "apihealth-ticket"),
    ])
    func eachRouteReachesItsReceiver(alertname: String, severity: String, receiver: String) async throws {
        let labels =
            ["alertname=\(alertname)", "host=api.maps.example", "country=BR", "env=production"]
            + (severity.isEmpty ? [] : ["severity=\(severity)"])
        let result = try await AlertmanagerProcess.amtool(
            ["config", "routes", "test", "--config.file=\(Self.shipped.path)"] + labels
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == receiver,
            "\(labels): \(result.stdout)"
        )
    }

    /// Every alert of every flavour links to a section of the shipped article (its runbook) and to a dashboard.
    @Test func everyAlertLinksARunbookSectionOfTheArticleAndADashboard() throws {
        let article = try String(
            contentsOf: DashboardFiles.folder.deletingLastPathComponent()
                .appendingPathComponent("Sources/APIHealth/Docs.docc/AlertingOnObjectives.md"),
            encoding: .utf8
        )
        // DocC's anchor of a heading: its text, spaces made hyphens.
        let anchors = Set(
            article.split(separator: "\n").filter { $0.hasPrefix("#") }.map {
                $0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: " ", with: "-")
            }
        )
        for (file, alert) in [
            ("alerts/apihealth.rules.yml", #"\n      - alert: "([^"]+)""#),
            ("grafana/provisioning/alerting/apihealth-influxql.yml", #"\n        title: "([^"]+)""#),
            ("grafana/provisioning/alerting/apihealth-flux.yml", #"\n        title: "([^"]+)""#),
        ] {
            let text = try String(contentsOf: DashboardFiles.folder.appendingPathComponent(file), encoding: .utf8)
            let alerts = DashboardFiles.matches(alert, in: text)
            let runbooks = DashboardFiles.matches(##"runbook_url: "[^"#]+#([^"]+)""##, in: text)
            let dashboards = DashboardFiles.matches(#"dashboard: "(http[^"]+)""#, in: text)
            #expect(alerts.count >= 9 && runbooks.count == alerts.count && dashboards.count == alerts.count, "\(file)")
            for anchor in runbooks { #expect(anchors.contains(anchor), "\(file): no section \(anchor)") }
        }
    }

    /// Grafana's notification policy (generated with the rules) groups and routes as the Alertmanager file does.
    @Test func grafanasNotificationPolicyGroupsAndRoutesLikeAlertmanager() throws {
        let alertmanager = try String(contentsOf: Self.shipped, encoding: .utf8)
        #expect(alertmanager.contains("  group_by: [alertname, env, service, host, country, region]\n"))
        #expect(
            alertmanager.contains(
                """
                    - matchers: [severity="page", alertname=~"APIHealthReachability.*"]
                      receiver: apihealth-page
                      group_by: [alertname, env, service, host]

                """
            )
        )
        let grafana = try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent(
                "grafana/provisioning/alerting/apihealth-delivery.yml"
            ),
            encoding: .utf8
        )
        #expect(
            grafana.contains(
                #"group_by:\#n      - "alertname"\#n      - "env"\#n      - "service"\#n      - "host"\#n      - "country"\#n      - "region"\#n"#
            )
        )
        #expect(
            grafana.contains(
                #"["alertname", "=~", "APIHealthReachability.*"]\#n        group_by:\#n          - "alertname"\#n          - "env"\#n          - "service"\#n          - "host"\#n"#
            ),
            "\(grafana)"
        )
        for severity in ["page", "ticket"] {
            #expect(alertmanager.contains("receiver: apihealth-\(severity)\n"))
            #expect(
                grafana.contains(
                    #"- receiver: "apihealth-\#(severity)"\#n        object_matchers:\#n          - ["severity", "=", "\#(severity)"]"#
                )
            )
            #expect(grafana.contains(#"url: "http://alert-receiver:9000/apihealth/\#(severity)""#))
            #expect(alertmanager.contains("url: http://alert-receiver:9000/apihealth/\(severity)\n"))
        }
    }

    static func alert(
        _ name: String,
        _ severity: String,
        path: String?,
        country: String,
        env: String = "production"
    ) -> [String: Any] {
        var labels = [
            "alertname": name, "severity": severity, "host": "api.maps.example", "service": "checkout",
            "country": country, "env": env,
        ]
        if let path { labels.merge(["method": "GET", "path": path, "module": "maps"]) { $1 } }
        return ["labels": labels, "annotations": ["summary": "\(name) \(country) \(path ?? "")"]]
    }

    /// Pages for two endpoints of one host from BR, one from DE, the reachability page of BR, and the failing-steadily
    /// ticket of one of BR's endpoints: the page receiver gets one notice for BR (its reachability: BR's burn-rate
    /// pages are held back by it) and one for DE's burn-rate page; the ticket is held back too.
    @Test func oneOutageIsOneNoticeAndAPageHoldsBackItsTicket() async throws {
        let receiver = try await AlertWebhookReceiver.start()
        let config = AlertmanagerProcess.config(
            try String(contentsOf: Self.shipped, encoding: .utf8),
            webhook: receiver.url
        )
        let alertmanager = try await AlertmanagerProcess.start(config: config)
        defer { alertmanager.stop() }
        let alert = Self.alert
        try await alertmanager.post(alerts: [
            alert("APIHealthAvailabilityBurnPage", "page", "/v1/tiles", "BR", "production"),
            alert("APIHealthAvailabilityBurnPage", "page", "/v1/styles", "BR", "production"),
            alert("APIHealthAvailabilityBurnPage", "page", "/v1/tiles", "DE", "production"),
            alert("APIHealthReachabilityTransportErrors", "page", nil, "BR", "production"),
            alert("APIHealthEndpointFailingSteadily", "ticket", "/v1/tiles", "BR", "production"),
        ])
        // The page route waits 10 s for a group's other alerts, then sends it.
        let told = await waitUntil(timeout: .seconds(120)) { receiver.notifications.count >= 2 }
        #expect(told, "\(receiver.notifications.map(\.groupLabels)) \(alertmanager.log)")
        let held = try await alertmanager.alerts()
        let notices = receiver.notifications
        #expect(notices.allSatisfy { $0.path == "/apihealth/page" && $0.status == "firing" })
        let groups = Dictionary(
            notices.map { ("\($0.groupLabels["alertname"] ?? "") \($0.groupLabels["country"] ?? "")", $0) },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(notices.count == 2 && groups.count == 2, "\(notices.map(\.groupLabels))")
        #expect(groups["APIHealthAvailabilityBurnPage DE"]?.alerts.count == 1)
        #expect(groups["APIHealthReachabilityTransportErrors "]?.alerts.count == 1)
        for notice in notices {
            #expect(notice.groupLabels["host"] == "api.maps.example" && notice.commonLabels["severity"] == "page")
            #expect(notice.groupLabels["env"] == "production", "\(notice.groupLabels)")
        }
        let states = Dictionary(
            held.map {
                ("\($0.labels["alertname"] ?? "") \($0.labels["country"] ?? "") \($0.labels["path"] ?? "")", $0.state)
            },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(
            states == [
                "APIHealthAvailabilityBurnPage BR /v1/tiles": "suppressed",
                "APIHealthAvailabilityBurnPage BR /v1/styles": "suppressed",
                "APIHealthAvailabilityBurnPage DE /v1/tiles": "active",
                "APIHealthReachabilityTransportErrors BR ": "active",
                "APIHealthEndpointFailingSteadily BR /v1/tiles": "suppressed",
            ],
            "\(states)"
        )
        try await receiver.shutdown()
    }

    /// A host down from every place, in production and in staging: production's three reachability pages are one
    /// notice listing BR, DE and US, staging's one is another; resolved, each group sends one resolved notice.
    @Test func aHostDownEverywhereIsOneNoticePerEnvListingThePlaces() async throws {
        let receiver = try await AlertWebhookReceiver.start()
        let config = AlertmanagerProcess.config(
            try String(contentsOf: Self.shipped, encoding: .utf8),
            webhook: receiver.url
        ).replacingOccurrences(of: "group_interval: 5m", with: "group_interval: 2s")
        let alertmanager = try await AlertmanagerProcess.start(config: config)
        defer { alertmanager.stop() }
        let alerts =
            ["BR", "DE", "US"].map {
                Self.alert("APIHealthReachabilityTransportErrors", "page", path: nil, country: $0)
            }
            + [Self.alert("APIHealthReachabilityTransportErrors", "page", path: nil, country: "BR", env: "staging")]
        try await alertmanager.post(alerts: alerts)
        let told = await waitUntil(timeout: .seconds(120)) { receiver.notifications.count >= 2 }
        #expect(told, "\(alertmanager.log)")
        let firing = receiver.notifications
        #expect(firing.count == 2, "\(firing.map(\.groupLabels))")
        let production = try #require(firing.first { $0.groupLabels["env"] == "production" })
        #expect(Set(production.alerts.compactMap { $0.labels["country"] }) == ["BR", "DE", "US"])
        #expect(production.groupLabels["country"] == nil, "one notice for the host, not one per place")
        #expect(firing.first { $0.groupLabels["env"] == "staging" }?.alerts.count == 1)

        // Resolved: an end in the past.
        let ended = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-1))
        try await alertmanager.post(alerts: alerts.map { $0.merging(["endsAt": ended]) { $1 } })
        let resolved = await waitUntil(timeout: .seconds(120)) {
            receiver.notifications.filter { $0.status == "resolved" }.count >= 2
        }
        #expect(resolved, "\(receiver.notifications.map(\.status)) \(alertmanager.log)")
        #expect(receiver.notifications.filter { $0.status == "firing" }.count == 2, "no other notice while it lasted")
        try await receiver.shutdown()
    }
}
