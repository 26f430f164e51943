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

    @Test(arguments: [
        ("page", "apihealth-page"), ("ticket", "apihealth-ticket"), ("", "apihealth-ticket"),
    ])
    func eachSeverityReachesItsReceiver(severity: String, receiver: String) async throws {
        let labels =
            ["alertname=APIHealthReachabilityTransportErrors", "host=api.maps.example", "country=BR"]
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

    /// Grafana's notification policy (generated with the rules) groups and routes as the Alertmanager file does.
    @Test func grafanasNotificationPolicyGroupsAndRoutesLikeAlertmanager() throws {
        let alertmanager = try String(contentsOf: Self.shipped, encoding: .utf8)
        #expect(alertmanager.contains("group_by: [alertname, host, country]\n"))
        let grafana = try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent(
                "grafana/provisioning/alerting/apihealth-delivery.yml"
            ),
            encoding: .utf8
        )
        #expect(grafana.contains(#"group_by:\#n      - "alertname"\#n      - "host"\#n      - "country"\#n"#))
        for severity in ["page", "ticket"] {
            #expect(
                alertmanager.contains("matchers: [severity=\"\(severity)\"]\n      receiver: apihealth-\(severity)\n")
            )
            #expect(
                grafana.contains(
                    #"- receiver: "apihealth-\#(severity)"\#n        object_matchers:\#n          - ["severity", "=", "\#(severity)"]"#
                )
            )
            #expect(grafana.contains(#"url: "http://alert-receiver:9000/apihealth/\#(severity)""#))
            #expect(alertmanager.contains("url: http://alert-receiver:9000/apihealth/\(severity)\n"))
        }
    }

    /// Pages for two endpoints of one host from BR, one from DE, the reachability page of BR, and the failing-steadily
    /// ticket of one of BR's endpoints: the page receiver gets one notice for the two endpoints from BR, one for DE and
    /// one for BR's reachability; the ticket is held back (suppressed) while the pages fire.
    @Test func oneOutageIsOneNoticeAndAPageHoldsBackItsTicket() async throws {
        let receiver = try await AlertWebhookReceiver.start()
        let config = AlertmanagerProcess.config(
            try String(contentsOf: Self.shipped, encoding: .utf8),
            webhook: receiver.url
        )
        let alertmanager = try await AlertmanagerProcess.start(config: config)
        defer { alertmanager.stop() }

        func alert(_ name: String, _ severity: String, path: String?, country: String) -> [String: Any] {
            var labels = [
                "alertname": name, "severity": severity, "host": "api.maps.example", "service": "checkout",
                "country": country,
            ]
            if let path { labels.merge(["method": "GET", "path": path, "module": "maps"]) { $1 } }
            return ["labels": labels, "annotations": ["summary": "\(name) \(country) \(path ?? "")"]]
        }
        try await alertmanager.post(alerts: [
            alert("APIHealthAvailabilityBurnPage", "page", path: "/v1/tiles", country: "BR"),
            alert("APIHealthAvailabilityBurnPage", "page", path: "/v1/styles", country: "BR"),
            alert("APIHealthAvailabilityBurnPage", "page", path: "/v1/tiles", country: "DE"),
            alert("APIHealthReachabilityTransportErrors", "page", path: nil, country: "BR"),
            alert("APIHealthEndpointFailingSteadily", "ticket", path: "/v1/tiles", country: "BR"),
        ])
        // The page route waits 10 s for a group's other alerts, then sends it.
        let told = await waitUntil(timeout: .seconds(120)) { receiver.notifications.count >= 3 }
        #expect(told, "\(receiver.notifications.map(\.groupLabels)) \(alertmanager.log)")
        let notices = receiver.notifications
        #expect(notices.allSatisfy { $0.path == "/apihealth/page" && $0.status == "firing" })
        let groups = Dictionary(
            notices.map { ("\($0.groupLabels["alertname"] ?? "") \($0.groupLabels["country"] ?? "")", $0) },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(notices.count == 3 && groups.count == 3, "\(notices.map(\.groupLabels))")
        #expect(groups["APIHealthAvailabilityBurnPage BR"]?.alerts.count == 2)
        #expect(groups["APIHealthAvailabilityBurnPage DE"]?.alerts.count == 1)
        #expect(groups["APIHealthReachabilityTransportErrors BR"]?.alerts.count == 1)
        for notice in notices {
            #expect(notice.groupLabels["host"] == "api.maps.example" && notice.commonLabels["severity"] == "page")
        }
        let held = try await alertmanager.alerts()
        let ticket = try #require(held.first { $0.labels["severity"] == "ticket" })
        #expect(ticket.state == "suppressed", "\(held.map { ($0.labels["alertname"] ?? "", $0.state) })")
        #expect(held.filter { $0.labels["severity"] == "page" }.allSatisfy { $0.state == "active" })
        try await receiver.shutdown()
    }
}
