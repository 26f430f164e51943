import Foundation
import TestSupport
import Testing

@testable import APIHealth

/// The shipped alert rules (dashboards/alerts, Grafana's provisioning/alerting, the InfluxDB template's checks), run
/// on a real alert engine: vmalert checks every rule file, then replays the recording rules and the alerts reading
/// them over known histories written to a real VictoriaMetrics, and the alerts it fires (the `ALERTS` series) must be
/// exactly the expected ones; the
/// InfluxQL of the Grafana rules runs on a real InfluxDB 1.x over the same history. There is no Flux engine here:
/// the Flux rules and the InfluxDB checks are checked for the names they read, as the dashboards' Flux is.
@Suite struct AlertRulesTests {
    static let alerts = DashboardFiles.folder.appendingPathComponent("alerts")

    /// The rule files vmalert loads (`*.rules.yml`): the recorded windows, then the alerts.
    static func ruleFiles() throws -> [URL] {
        try DashboardFiles.files("alerts", ".rules.yml").map { alerts.appendingPathComponent($0.name) }
    }

    static let recordingRules = alerts.appendingPathComponent("apihealth.recording.rules.yml")
    static let alertRules = alerts.appendingPathComponent("apihealth.rules.yml")

    static func vmalert(_ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
        try await Child.run(try VictoriaProcess.path(of: "vmalert"), arguments + ["-loggerLevel=WARN"])
    }

    @Test func everyRuleFilePassesVmalertsCheck() async throws {
        let files = try Self.ruleFiles()
        #expect(files.map(\.lastPathComponent) == ["apihealth.recording.rules.yml", "apihealth.rules.yml"])
        for file in files {
            let result = try await Self.vmalert(["-dryRun", "-rule=\(file.path)"])
            #expect(result.status == 0, "\(file.lastPathComponent): \(result.stderr)")
        }
        let both = try await Self.vmalert(["-dryRun"] + files.map { "-rule=\($0.path)" })
        #expect(both.status == 0, "both files at once: \(both.stderr)")
        // The check reads expressions and templates: a rule with a broken one fails it.
        let broken = try String(contentsOf: files[0], encoding: .utf8)
            .replacingOccurrences(of: "sum_over_time(apihealth_request_interval_errors[1h])", with: "sum_over_time(")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("alerts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let copy = folder.appendingPathComponent("broken.yml")
        try Data(broken.utf8).write(to: copy)
        let result = try await Self.vmalert(["-dryRun", "-rule=\(copy.path)"])
        #expect(result.status != 0, "a broken expression fails the check")
    }

    /// One expected alert: fired (firing, after its `for`) from `from` to `to` minutes relative to the end, each
    /// evaluation (every minute) in between, for the series with `labels`.
    struct Firing: Hashable, CustomStringConvertible {
        var alert: String
        var who: String
        var from: Int64
        var to: Int64
        var description: String { "\(alert) \(who) firing from \(from) to \(to) min" }
    }

    /// Which alert fires for which endpoint or agent, and when (minutes before the end; evaluations every minute at
    /// whole minutes, interval points at :30, so window edges never tie):
    /// - burning (eu-west): 2 % errors for the last hour, burn rate 20. The 1 h window passes 14.4 once 44 bad
    ///   minutes are in it (20 × 44 / 60 = 14.7): pending at -16, firing 2 min later at -14.
    /// - slow: 12 % slower than 300 ms for 4 hours, burn rate 12 (below 14.4). The 6 h window passes 6 with 181 bad
    ///   minutes (12 × 181 / 360): pending at -59, firing at -57.
    /// - recovering: 3 % errors from -600 to -420, burn rate 30. Page: the 1 h window passes 14.4 with 29 bad minutes
    ///   (pending -571, firing -569); it stays while the 30 min window holds more than 6 bad minutes (30 × 7 / 30 >
    ///   6), to -397. Ticket: the 1 d window passes 3 with 145 bad minutes (pending -455, firing after 15 min at
    ///   -440); it stays while the 6 h window holds more than 12 bad minutes (3-day burn 1.25 > 1), to -73.
    /// - checkout-2's last health point is at -30 min 5 s: more than 30 s without one from -29 on.
    /// - checkout-3 drops points from -120 to -90 min: its dropped total rises in each 10 min window to -80.
    /// - parsing: 5 % of its responses fail to parse from -30 min; the 15 min share passes 1 % with 4 minutes of
    ///   failures (40 / 3000) at -26, firing 5 min later at -21.
    /// - none for the healthy endpoint (0.05 %, burn rate 0.5), nor for the burning endpoint seen from us-east.
    static let expectedFirings: Set<Firing> = [
        Firing(alert: "APIHealthAvailabilityBurnPage", who: "burning", from: -14, to: 0),
        Firing(alert: "APIHealthLatencyBurnPage", who: "slow", from: -57, to: 0),
        Firing(alert: "APIHealthAvailabilityBurnPage", who: "recovering", from: -569, to: -397),
        Firing(alert: "APIHealthAvailabilityBurnTicket", who: "recovering", from: -440, to: -73),
        Firing(alert: "APIHealthAgentStoppedReporting", who: "checkout-2", from: -29, to: 0),
        Firing(alert: "APIHealthAgentLosingPoints", who: "checkout-3", from: -119, to: -80),
        Firing(alert: "APIHealthResponsesNotParsing", who: "parsing", from: -21, to: 0),
    ]

    /// vmalert refuses the `query` template function in replay mode: the replayed copy leaves out the annotations
    /// that call it (the budget left; the reachability alerts' share elsewhere and failing kind), and nothing else.
    static func replayableRules() throws -> URL {
        let text = try String(contentsOf: alertRules, encoding: .utf8)
        let kept = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains("| query }}") }
        #expect(
            text.split(separator: "\n", omittingEmptySubsequences: false).count - kept.count == 4 + 5 + 4,
            """
            one description per burn-rate alert; description, share elsewhere, counts, failing kind and places \
            failing of the transport errors' reachability alert; the same but the failing kind of the 5xx one
            """
        )
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let copy = folder.appendingPathComponent("apihealth.rules.yml")
        try Data(kept.joined(separator: "\n").utf8).write(to: copy)
        return copy
    }

    static func rfc3339(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    /// Writes `lines` to `server`, replays the recording rules and then the alerts reading them over the `replayed`
    /// seconds ending at `end`, and returns the firing `ALERTS` series once `count` of them are searchable. vmalert
    /// replays one group after another, and the groups recorded every 5 minutes at the query step of 1 minute (so
    /// every window's value is the one of its evaluation's minute); the alerts run once every recorded sample is
    /// written and searchable.
    static func replay(
        _ lines: [UInt8],
        on server: VictoriaProcess,
        end: Int64,
        replayed: Int64,
        count: Int
    ) async throws -> [VictoriaMetrics.Series] {
        let victoria = VictoriaMetrics(base: server.url)
        let reply = try await victoria.write(lines, precision: "s")
        #expect(reply.status == 204, "\(reply.text)")
        #expect(try await victoria.invalidRows() == 0)
        try await victoria.forceFlush()

        let rules = try Self.replayableRules()
        defer { try? FileManager.default.removeItem(at: rules.deletingLastPathComponent()) }
        for file in [Self.recordingRules, rules] {
            let result = try await Self.vmalert([
                "-rule=\(file.path)", "-datasource.url=\(server.url.absoluteString)",
                "-remoteWrite.url=\(server.url.absoluteString)",
                "-replay.timeFrom=\(Self.rfc3339(end - replayed))", "-replay.timeTo=\(Self.rfc3339(end))",
                // One query point per evaluation (the default step is 5 min, which breaks `for`).
                "-datasource.queryStep=1m", "-replay.disableProgressBar", "-replay.rulesDelay=0s",
            ])
            #expect(result.status == 0, "\(file.lastPathComponent): \(result.stderr)")
            // vmalert's remote write is flushed when it exits; the server makes it searchable.
            let recorded = try await waitUntil {
                try await victoria.query("max(timestamp(apihealth_endpoint:requests:sum3d))", at: Double(end))
                    .first?.value == Double(end)
            }
            #expect(recorded, "the recorded windows reach the end")
        }
        var alerts: [VictoriaMetrics.Series] = []
        _ = try await waitUntil {
            alerts = try await victoria.export(namePattern: "ALERTS").filter { $0.labels["alertstate"] == "firing" }
            return alerts.count >= count
        }
        return alerts
    }

    @Test func replayFiresExactlyTheExpectedAlertsForEachEndpointAndAgent() async throws {
        let server = try await VictoriaProcess.victoriaMetrics()
        defer { server.stop() }
        let victoria = VictoriaMetrics(base: server.url)
        let end = AlertHistory.end()
        let alerts = try await Self.replay(
            AlertHistory.lines(end: end),
            on: server,
            end: end,
            replayed: AlertHistory.replayed,
            count: Self.expectedFirings.count
        )
        let byLabels = Dictionary(uniqueKeysWithValues: AlertHistory.endpoints.map { ($0.labels, $0.name) })
        var firings = Set<Firing>()
        for series in alerts {
            var labels = series.labels
            let alert = labels["alertname"] ?? ""
            let severity = labels["severity"]
            for name in ["__name__", "alertname", "alertstate", "alertgroup", "severity"] { labels[name] = nil }
            let who = byLabels[labels] ?? labels["instance"] ?? "\(labels)"
            if alert.contains("Burn") || alert.contains("Parsing") {
                // The endpoint's labels and its global tag (region), without instance or status class.
                #expect(byLabels[labels] != nil, "\(alert): \(series.labels)")
                #expect(severity == (alert.hasSuffix("Ticket") ? "ticket" : "page"), "\(alert)")
            } else {
                #expect(labels["service"] == AlertHistory.service && labels["region"] == "eu-west", "\(alert)")
            }
            let minutes = series.timestamps.map { ($0 / 1_000 - end) / 60 }.sorted()
            // One run of consecutive evaluations.
            #expect(
                minutes == Array((minutes.first ?? 0)...(minutes.last ?? -1)),
                "\(alert) \(who): \(minutes)"
            )
            firings.insert(Firing(alert: alert, who: who, from: minutes.first ?? 0, to: minutes.last ?? 0))
        }
        #expect(
            firings == Self.expectedFirings,
            "unexpected: \(firings.subtracting(Self.expectedFirings)); missing: \(Self.expectedFirings.subtracting(firings))"
        )

        // The SLO panels of the VictoriaMetrics dashboard on the same history, at its end.
        func panel(_ name: String, range: String) async throws -> [String: [String: Double]] {
            let query = try MetricsQLDashboardTests.query(name, interval: 3_600, range: range)
            var values: [String: [String: Double]] = [:]
            for sample in try await victoria.query(query, at: Double(end)) {
                var labels = sample.labels
                let objective = labels.removeValue(forKey: "objective") ?? ""
                values[byLabels[labels] ?? "\(labels)", default: [:]][objective] = sample.value
            }
            return values
        }
        let objectives = AlertHistory.endpoints.filter(\.hasObjectives)
        let burn = try await panel("slo_burn_rate", range: "1h")
        let left = try await panel("slo_budget_left", range: "\(AlertHistory.length)s")
        #expect(Set(burn.keys) == Set(objectives.map(\.name)) && Set(left.keys) == Set(burn.keys), "\(burn)")
        for endpoint in objectives {
            for (objective, latency) in [("availability", false), ("latency", true)] {
                let rate = AlertHistory.burnRate(endpoint, latency: latency, seconds: AlertHistory.hour)
                let whole = AlertHistory.burnRate(endpoint, latency: latency, seconds: AlertHistory.length)
                #expect(abs((burn[endpoint.name]?[objective] ?? .nan) - rate) < 1e-9, "\(endpoint.name) \(objective)")
                #expect(
                    abs((left[endpoint.name]?[objective] ?? .nan) - (1 - whole)) < 1e-9,
                    "\(endpoint.name) \(objective): \(left[endpoint.name] ?? [:]) vs \(1 - whole)"
                )
            }
        }
        #expect(abs((burn["burning"]?["availability"] ?? 0) - 20) < 1e-9)
        #expect(abs((burn["slow"]?["latency"] ?? 0) - 12) < 1e-9)
    }

    /// Which alerts fire over ``AlertScenarios`` (minutes before the end; reachability reads a 10-minute window and
    /// waits 2 minutes, the failing-steadily ticket reads 6 hours and waits 15):
    /// - maps from BR: every request fails to connect from -60 to -30. One failed minute of ten is 10 %, above 5 %
    ///   and 5 times the 0 % from DE and US, from three instances: pending at -59, firing at -57. The failing
    ///   sources of the last failed minute (-30.5), recorded at -30, leave the 10-minute window at -20: firing to
    ///   -21. Its 6-hour share passes 5 % with 19 failed minutes at -41: the ticket fires from
    ///   -26 to the end.
    /// - video from DE: half the requests get a 5xx from -120 to -90. One such minute is 5 % (not above); two are
    ///   10 %: pending -118, firing -116, to -82.
    /// - pay from BR and DE (several places down), auth from every place (a host down everywhere), solo from IS (no
    ///   elsewhere): every request fails to connect from -45 to -30. Against the rest of the host each is at most 3
    ///   times as bad (or has no rest); five failed minutes of ten (50 %) are an outage outright: pending -40, firing
    ///   -38 (8 minutes after the first failure), to -25 (four failed minutes left in the window at -24).
    /// - shop from US: 40 % of the app's traffic over four versions, every request failing from -45: summed over the
    ///   versions, 10 % failing against 0 % from BR, DE and FR at -44 (installs stamp their points 20 to 39 s into a
    ///   minute): firing -42, to -21.
    /// - news from IS: three installs of ten fail (k = 3): 6 % of IS's requests at -43, firing -41, to -22. feed from IS:
    ///   two installs (k - 1) fail the same way: nothing. chat from IS: one phone fails 210 requests to connect in 30
    ///   minutes, another is offline (the device's failures, no error of the API): nothing.
    /// - small (one request a minute, 99.9 % objective): its one failure at -29.5 is 1/60 of the hour, a burn rate of
    ///   16.7; the hour holds 60 requests, under the guard's 100: nothing. quiet (two requests a minute): two failures
    ///   at -30.5 and -28.5 burn 16.7 over the hour and 200 over five minutes with 120 requests, but five minutes hold
    ///   two failures, under the page's five: nothing.
    /// - tiny (one request a minute, no objective): 30 % fail from -360. The 20th failure (5.6 % of the 6 hours' 360
    ///   requests) comes at -296: the ticket fires at -281, to the end. h5, the same with a 99.9 % objective: the 6 h /
    ///   30 min arm pages once the 30 minutes hold five failures (-346), firing at -344; the ticket arms (3 over 1 d
    ///   and 2 h) at -331; and the failing-steadily ticket as tiny's.
    /// - late (an app, 99.9 %): 30 % fail from -12, its points of the last 6 minutes not arrived. The fast page fires at
    ///   -7 and holds to the end: at the end its 5-minute window ending now is empty, the one ending 5 minutes ago
    ///   (app installs' late batches) burns 300. Read without the late window it would resolve at 0.
    /// - nothing from DE or US to maps, from BR or US to video, from FR or US to pay, from BR, DE or FR to shop.
    static let expectedScenarioFirings: Set<Firing> = [
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "maps from BR", from: -57, to: -21),
        Firing(alert: "APIHealthEndpointFailingSteadily", who: "maps from BR", from: -26, to: 0),
        Firing(alert: "APIHealthReachabilityServerErrors", who: "video from DE", from: -116, to: -82),
        Firing(alert: "APIHealthEndpointFailingSteadily", who: "tiny", from: -281, to: 0),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "pay from BR", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "pay from DE", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "auth from BR", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "auth from DE", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "auth from US", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "rates from IS", from: -38, to: -25),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "shop from US", from: -42, to: -21),
        Firing(alert: "APIHealthReachabilityTransportErrors", who: "news from IS", from: -41, to: -22),
        Firing(alert: "APIHealthAvailabilityBurnPage", who: "h5", from: -344, to: 0),
        Firing(alert: "APIHealthAvailabilityBurnTicket", who: "h5", from: -331, to: 0),
        Firing(alert: "APIHealthEndpointFailingSteadily", who: "h5", from: -281, to: 0),
        Firing(alert: "APIHealthAvailabilityBurnPage", who: "late", from: -7, to: 0),
    ]

    /// The places whose reachability condition holds (pending or firing) 40 minutes before the end of
    /// ``AlertScenarios`` for transport errors, and 100 minutes before for 5xx: what every flavour that runs here
    /// (vmalert's replay, Grafana's InfluxQL on InfluxDB 1.x) must tell, as "host country".
    static let placesFailing: [(minutes: Int64, failure: String, places: Set<String>)] = [
        (
            -40, "transport_errors",
            [
                "api.maps.example BR", "api.pay.example BR", "api.pay.example DE", "api.auth.example BR",
                "api.auth.example DE", "api.auth.example US", "api.solo.example IS", "api.shop.example US",
                "api.news.example IS",
            ]
        ),
        (-100, "server_errors", ["api.video.example DE"]),
    ]

    @Test func replayTellsACountryOutageWithoutObjectivesAndGuardsSmallEndpoints() async throws {
        let server = try await VictoriaProcess.victoriaMetrics()
        defer { server.stop() }
        let end = AlertHistory.end()
        let alerts = try await Self.replay(
            AlertScenarios.lines(end: end),
            on: server,
            end: end,
            replayed: AlertScenarios.replayed,
            count: Self.expectedScenarioFirings.count
        )
        var firings = Set<Firing>()
        for series in alerts {
            var labels = series.labels
            let alert = labels["alertname"] ?? ""
            let severity = labels["severity"]
            for name in ["__name__", "alertname", "alertstate", "alertgroup", "severity"] { labels[name] = nil }
            let who: String
            if alert.hasPrefix("APIHealthReachability") {
                // Per host and place: no endpoint tags, no instance.
                #expect(Set(labels.keys) == ["host", "service", "country"], "\(alert): \(series.labels)")
                #expect(severity == "page")
                let place = AlertScenarios.places.first { $0.host == labels["host"] && $0.country == labels["country"] }
                who = place?.name ?? "\(labels)"
            } else {
                #expect(severity == (alert.hasSuffix("Page") ? "page" : "ticket"), "\(alert)")
                who = AlertScenarios.places.first { $0.labels == labels }?.name ?? "\(labels)"
            }
            let minutes = series.timestamps.map { ($0 / 1_000 - end) / 60 }.sorted()
            #expect(minutes == Array((minutes.first ?? 0)...(minutes.last ?? -1)), "\(alert) \(who): \(minutes)")
            firings.insert(Firing(alert: alert, who: who, from: minutes.first ?? 0, to: minutes.last ?? 0))
        }
        let unexpected = firings.subtracting(Self.expectedScenarioFirings)
        let missing = Self.expectedScenarioFirings.subtracting(firings)
        #expect(firings == Self.expectedScenarioFirings, "unexpected: \(unexpected); missing: \(missing)")

        // The flavours agree: the places vmalert holds (pending or firing) are those the Grafana InfluxQL rules tell
        // on InfluxDB at the same time (theGrafanaReachabilityRulesTellTheFailingCountryOnInfluxDB).
        for (minutes, failure, places) in Self.placesFailing {
            let alert = failure == "transport_errors" ? "TransportErrors" : "ServerErrors"
            let held = try await VictoriaMetrics(base: server.url).query(
                #"last_over_time(ALERTS{alertname="APIHealthReachability\#(alert)"}[30s])"#,
                at: Double(end + minutes * 60)
            )
            #expect(
                Set(held.map { "\($0.labels["host"] ?? "") \($0.labels["country"] ?? "")" }) == places,
                "\(failure) at \(minutes) min: \(held.map(\.labels))"
            )
        }

        // The offline phone's failures are the dashboard's series apart: 10 a minute on its device, none of the API's.
        let device = try await VictoriaMetrics(base: server.url).query(
            try MetricsQLDashboardTests.query("device_failures", interval: 600),
            at: Double(end - 45 * 60)
        )
        #expect(
            device.map(\.labels) == [["host": "api.chat.example", "kind": "errors_device", "service": "checkout"]]
                && abs((device.first?.value ?? 0) - 100.0 / 600) < 1e-9,
            "\(device)"
        )

        // What the guards held back, as the recorded windows have it: feed from IS fails 20 % against 0 % elsewhere
        // from two installs (news: three); quiet burns 16.7 over the hour with 120 requests and two failures in five
        // minutes.
        let victoria = VictoriaMetrics(base: server.url)
        func value(_ query: String, at minutes: Int64) async throws -> Double? {
            try await victoria.query(query, at: Double(end + minutes * 60)).first?.value
        }
        let feed = #"{host="api.feed.example", country="IS"}"#
        let news = #"{host="api.news.example", country="IS"}"#
        #expect(
            try await value("max_over_time(apihealth_host:transport_errors_sources:count1m\(feed)[10m])", at: -35) == 2
        )
        #expect(
            try await value("max_over_time(apihealth_host:transport_errors_sources:count1m\(news)[10m])", at: -35) == 3
        )
        #expect(
            try await value(
                "apihealth_host:transport_errors:sum10m\(feed) / apihealth_host:requests:sum10m\(feed)",
                at: -35
            ) == 0.2
        )
        let quiet = #"{host="api.quiet.example"}"#
        let burn = try await value(
            "apihealth_endpoint:errors:sum1h\(quiet) / apihealth_endpoint:requests:sum1h\(quiet) / (1 - 0.999)",
            at: -28
        )
        #expect((burn ?? 0) > 14.4, "\(String(describing: burn))")
        #expect(try await value("apihealth_endpoint:errors:sum5m\(quiet)", at: -28) == 2)
        #expect(try await value("apihealth_endpoint:requests:sum1h\(quiet)", at: -28) == 120)
    }

    /// The Grafana reachability rules' four InfluxQL sums (a place's failures and requests, its host's) and the place's
    /// failing sources, run on a real InfluxDB 1.x over ``AlertScenarios`` and combined as the rule's math expression
    /// does: 40 minutes before the end the places the vmalert rules tell then (transport errors: BR to maps, the
    /// several, every and only places of pay, auth and solo, US to shop over its four app versions, IS to news from
    /// three installs, and not IS to feed from two nor to chat from one phone), 100 minutes before only DE's to the
    /// video host (5xx). At the end, the failing-steadily rule's sums tell BR's maps requests and the endpoints failing
    /// 30 % for six hours.
    @Test func theGrafanaReachabilityRulesTellTheFailingCountryOnInfluxDB() async throws {
        let influx = try await InfluxDB1.freshDatabase("reachability")
        let end = AlertHistory.end()
        let lines = AlertScenarios.lines(end: end)
        let reply = try await influx.write(lines, precision: "s")
        #expect(reply.status == 204, "\(reply.text)")
        #expect(try await influx.waitUntilQueryable(lines), "the history's points answer queries")
        // The transport errors' rule, then the 5xx one: four sums and the failing sources each.
        // After the burn-rate rules' 24 queries and the agent rules' two.
        let all = try Self.grafanaQueries("influxql")
        let queries = Array(all[26..<36])
        for (rule, (minutes, failure, told)) in Self.placesFailing.enumerated() {
            let at = end + minutes * 60
            let sums = queries[(rule * 5)..<(rule * 5 + 5)]
            #expect(
                sums.count == 5 && sums.allSatisfy { $0.seconds == 600 } && sums.first?.query.contains(failure) == true
                    && sums.last?.query.contains("\(failure)_sources") == true,
                "\(failure)"
            )
            // The rule's order: the place's failures, its requests, the host's failures, its requests, the place's
            // failing sources.
            var values: [[String: Double]] = []
            for (query, seconds) in sums {
                var byKey: [String: Double] = [:]
                for entry in try await influx.query(Self.influxQL(query, seconds: seconds, end: at)) {
                    let key = [entry.tags["host"] ?? "", entry.tags["country"] ?? ""].filter { !$0.isEmpty }
                        .joined(separator: " ")
                    let column = entry.columns.last ?? ""
                    byKey[key] = InfluxQLDashboardTests.number(entry.rows.first, column)
                }
                values.append(byKey)
            }
            var firing: [String] = []
            for (place, failures) in values[0] {
                let host = String(place.split(separator: " ")[0])
                let requests = values[1][place] ?? 0
                let share = failures / requests
                // NaN where the host has no other place: only the outright test holds.
                let elsewhere = ((values[2][host] ?? 0) - failures) / ((values[3][host] ?? 0) - requests)
                if share > 0.05 && requests >= 100 && (values[4][place] ?? 0) >= 3
                    && (share >= 0.5 || share > 5 * elsewhere)
                {
                    firing.append(place)
                }
            }
            #expect(Set(firing) == told, "\(failure) at \(minutes) min: \(values)")
            #expect(values[4]["api.feed.example IS"] == (rule == 0 ? 2 : nil), "k - 1 installs: \(values[4])")
        }
        // The dashboard's panel of the device's own failures: the offline phone's 10 a minute, per second.
        let device = try DashboardFiles.influxQL("device_failures")
            .replacingOccurrences(of: "$timeFilter", with: "time > \(end - 3_000)s AND time <= \(end - 2_400)s")
            .replacingOccurrences(of: "$__interval_ms", with: "600000").replacingOccurrences(
                of: "$__interval",
                with: "600s"
            )
            .replacingOccurrences(of: "$instance", with: ".*").replacingOccurrences(of: "$env", with: ".*")
            .replacingOccurrences(of: "$country", with: ".*").replacingOccurrences(of: "$host", with: ".*")
            .replacingOccurrences(of: "$group_by", with: "service")
        let perHost = Dictionary(
            try await influx.query(device).map {
                ($0.tags["host"] ?? "", InfluxQLDashboardTests.number($0.rows.first, "device_per_second"))
            },
            uniquingKeysWith: { first, _ in first }
        )
        #expect(perHost["api.chat.example"] == 100.0 / 600, "\(perHost)")
        #expect(perHost.filter { $0.value != nil }.count == 1, "\(perHost)")

        // The availability page's guard: the failures of its 5-minute window. quiet's two failures at -30.5 and -28.5
        // are under the 5 a page needs; h5's 30 % at one request a minute is one or two in five minutes, and its 30
        // minutes (the slow arm's short window) hold nine.
        let guardQueries = Array(all[0..<7])
        #expect(guardQueries[2].seconds == 300 && guardQueries[5].seconds == 1_800, "\(guardQueries.map(\.seconds))")
        func failures(_ query: String, seconds: Int64, at minutes: Int64) async throws -> [String: Double] {
            var byHost: [String: Double] = [:]
            for entry in try await influx.query(Self.influxQL(query, seconds: seconds, end: end + minutes * 60)) {
                byHost[entry.tags["host"] ?? ""] = InfluxQLDashboardTests.number(entry.rows.first, "failures")
            }
            return byHost
        }
        #expect(try await failures(guardQueries[2].query, seconds: 300, at: -28)["api.quiet.example"] == 2)
        #expect(try await failures(guardQueries[5].query, seconds: 1_800, at: 0)["api.h5.example"] == 9)

        // The failing-steadily rule at the end: failures and requests over 6 hours, failures over the last one, the
        // interval points with failures over 6 hours.
        let steady = Array(all[36..<40])
        #expect(
            steady.map(\.seconds) == [6 * 3_600, 6 * 3_600, 3_600, 6 * 3_600]
                && steady[0].query.contains("\"failures\"")
        )
        var sums: [[String: Double]] = []
        for (query, seconds) in steady {
            var byKey: [String: Double] = [:]
            for entry in try await influx.query(Self.influxQL(query, seconds: seconds, end: end)) {
                let key = "\(entry.tags["host"] ?? "") \(entry.tags["country"] ?? "")"
                byKey[key] = InfluxQLDashboardTests.number(entry.rows.first, entry.columns.last ?? "")
            }
            sums.append(byKey)
        }
        let failingSteadily = sums[0].filter { place, failures in
            failures / (sums[1][place] ?? 0) > 0.05 && failures >= 20 && (sums[2][place] ?? 0) > 0
                && (sums[3][place] ?? 0) >= 3
        }
        #expect(
            Set(failingSteadily.keys) == ["api.maps.example BR", "api.tiny.example US", "api.h5.example US"],
            "\(sums)"
        )
        #expect(failingSteadily["api.tiny.example US"] == 108, "30 % of the last 6 hours' 360 requests")
    }

    /// The Grafana rules' InfluxQL, as Grafana sends it for a window ending at `end`.
    static func influxQL(_ query: String, seconds: Int64, end: Int64) -> String {
        query.replacingOccurrences(of: "$timeFilter", with: "time > \(end - seconds)s AND time <= \(end)s")
            .replacingOccurrences(of: "now()", with: "\(end)s")
    }

    /// The queries and the relative time ranges of a generated Grafana alerting file, in order.
    static func grafanaQueries(_ language: String) throws -> [(query: String, seconds: Int64)] {
        let text = try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent(
                "grafana/provisioning/alerting/apihealth-\(language).yml"
            ),
            encoding: .utf8
        )
        // The generator writes a query as a JSON string on one line, or (Flux) as a block (`query: |`).
        var result: [(String, Int64)] = []
        var seconds: Int64 = 0
        var block: (indent: Int, lines: [String])?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let indent = line.prefix { $0 == " " }.count
            if let current = block {
                if line.isEmpty || indent >= current.indent {
                    block?.lines.append(String(line.dropFirst(min(indent, current.indent))))
                    continue
                }
                result.append((current.lines.joined(separator: "\n").trimmingCharacters(in: .newlines), seconds))
                block = nil
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("from: "), let value = Int64(trimmed.dropFirst(6)) { seconds = value }
            if trimmed == "query: |" {
                block = (indent + 2, [])
            } else if trimmed.hasPrefix("query: ") {
                let query = try JSONDecoder().decode(String.self, from: Data(trimmed.dropFirst(7).utf8))
                result.append((query, seconds))
            }
        }
        return result
    }

    @Test func theGrafanaInfluxQLRulesComputeTheBurnRatesOfTheHistoryOnInfluxDB() async throws {
        let influx = try await InfluxDB1.freshDatabase("alerts")
        let end = AlertHistory.end()
        let lines = AlertHistory.lines(end: end)
        let reply = try await influx.write(lines, precision: "s")
        #expect(reply.status == 204, "\(reply.text)")
        #expect(try await influx.waitUntilQueryable(lines), "the history's points answer queries")
        let queries = try Self.grafanaQueries("influxql")
        // Per burn-rate rule: two windows for each of two arms (and a page's failures in its short window), and 30
        // days for the budget; then the two agent rules, the two reachability rules' four sums and failing sources,
        // and the failing-steadily rule's four.
        let expectedQueries = 2 * 7 + 2 * 5 + 2 + 2 * 5 + 4
        #expect(queries.count == expectedQueries)
        let byLabels = Dictionary(uniqueKeysWithValues: AlertHistory.endpoints.map { ($0.labels, $0.name) })
        for (query, seconds) in queries where query.contains("\"burn_rate\"") {
            let latency = query.contains("requests_within_latency_objective")
            let series = try await influx.query(Self.influxQL(query, seconds: seconds, end: end))
            var values: [String: Double] = [:]
            for entry in series {
                let labels = entry.tags.filter { !$0.value.isEmpty }
                values[byLabels[labels] ?? "\(labels)"] = InfluxQLDashboardTests.number(entry.rows.first, "burn_rate")
            }
            // Endpoints without an objective have no burn rate.
            let expected = Dictionary(
                uniqueKeysWithValues: AlertHistory.endpoints.filter(\.hasObjectives).map {
                    ($0.name, AlertHistory.burnRate($0, latency: latency, seconds: min(seconds, AlertHistory.length)))
                }
            )
            #expect(Set(values.keys) == Set(expected.keys), "\(seconds) s: \(values)")
            for (name, value) in expected {
                #expect(
                    abs((values[name] ?? .nan) - value) < 1e-9,
                    "\(latency ? "latency" : "availability") \(seconds) s \(name): \(values[name] ?? .nan) vs \(value)"
                )
            }
        }
        #expect(abs(AlertHistory.burnRate(AlertHistory.burning, latency: false, seconds: 300) - 20) < 1e-9)

        // The InfluxQL dashboard's SLO panels on the same history: the budget left over all of it, the burn rate of
        // its last hour.
        for (name, seconds) in [("slo_budget_left", AlertHistory.length), ("slo_burn_rate", AlertHistory.hour)] {
            let query = try DashboardFiles.influxQL(name)
                .replacingOccurrences(of: "$timeFilter", with: "time > \(end - seconds)s AND time <= \(end)s")
                .replacingOccurrences(of: "$__interval", with: "\(seconds)s")
                .replacingOccurrences(of: "$instance", with: ".*").replacingOccurrences(of: "$env", with: ".*")
                .replacingOccurrences(of: "$country", with: ".*").replacingOccurrences(of: "$host", with: ".*")
                .replacingOccurrences(of: "$group_by", with: "service")
            var measured: [String: [Double]] = [:]
            for entry in try await influx.query(query) {
                let labels = ["host", "method", "path"].map { entry.tags[$0] ?? "" }.joined(separator: " ")
                let columns =
                    name == "slo_budget_left"
                    ? ["availability_budget_left", "latency_budget_left"]
                    : ["availability_burn_rate", "latency_burn_rate"]
                let row = entry.rows.last { InfluxQLDashboardTests.number($0, columns[0]) != nil }
                if let row { measured[labels, default: []] += columns.map { InfluxQLDashboardTests.number(row, $0)! } }
            }
            var expected: [String: [Double]] = [:]
            for endpoint in AlertHistory.endpoints where endpoint.hasObjectives {
                let labels = "\(endpoint.host) \(endpoint.method) \(endpoint.path)"
                let rates = [false, true].map { AlertHistory.burnRate(endpoint, latency: $0, seconds: seconds) }
                // Both regions of the burning endpoint are one series here (the panel groups by endpoint).
                if endpoint == AlertHistory.burningElsewhere { continue }
                let both =
                    endpoint == AlertHistory.burning
                    ? [false, true].map {
                        (AlertHistory.burnRate(AlertHistory.burning, latency: $0, seconds: seconds)
                            + AlertHistory.burnRate(AlertHistory.burningElsewhere, latency: $0, seconds: seconds)) / 2
                    } : rates
                expected[labels] = name == "slo_budget_left" ? both.map { 1 - $0 } : both
            }
            #expect(Set(measured.keys) == Set(expected.keys), "\(name): \(measured)")
            for (labels, values) in expected {
                let got = measured[labels] ?? []
                #expect(
                    got.count == 2 && zip(got, values).allSatisfy { abs($0 - $1) < 1e-9 },
                    "\(name) \(labels): \(got) vs \(values)"
                )
            }
        }

        // The deadman: each instance's health points an interval over the last four (10 s) intervals, at the end:
        // none for the instance that went silent 30 minutes before; the last interval is still empty for the others.
        let silence = try #require(queries.first { $0.query.contains("points_recorded") })
        let points = try await influx.query(Self.influxQL(silence.query, seconds: silence.seconds, end: end))
        let byInstance = Dictionary(
            uniqueKeysWithValues: points.map {
                ($0.tags["instance"] ?? "", InfluxQLDashboardTests.number($0.rows.last, "points") ?? .nan)
            }
        )
        #expect(byInstance == ["checkout-1": 0.75, "checkout-2": 0, "checkout-3": 0.75], "\(byInstance)")
        // Losing points: checkout-3's dropped total over the 10 minutes to 85 minutes before the end.
        let loss = try #require(queries.first { $0.query.contains("spread(") })
        let lost = try await influx.query(Self.influxQL(loss.query, seconds: loss.seconds, end: end - 85 * 60))
        let lostBy = Dictionary(
            uniqueKeysWithValues: lost.map {
                ($0.tags["instance"] ?? "", InfluxQLDashboardTests.number($0.rows.first, "points_lost") ?? .nan)
            }
        )
        let window = AlertHistory.healthPointTimes("checkout-3").filter { $0 > -95 * 60 && $0 <= -85 * 60 }
        let expectedLoss = Double(
            AlertHistory.pointsDropped("checkout-3", at: window.last!)
                - AlertHistory.pointsDropped("checkout-3", at: window.first!)
        )
        #expect(
            expectedLoss > 0 && lostBy == ["checkout-1": 0, "checkout-2": 0, "checkout-3": expectedLoss],
            "\(lostBy)"
        )
    }

    @Test func theFluxRulesAndInfluxDBChecksReadOnlyWhatTheAgentWrites() throws {
        // burn_over_limit, unreachable_over_limit and failing_over_limit are the fields a check's query makes, for
        // the check to test.
        let fields = DashboardContractTests.fields.union(PointSchema.objectiveIntervalFields).union([
            "burn_over_limit", "unreachable_over_limit", "failing_over_limit",
        ])
        let flux = try Self.grafanaQueries("flux")
        let expectedQueries = 2 * 7 + 2 * 5 + 2 + 2 * 5 + 4
        #expect(flux.count == expectedQueries)
        let template = try #require(try DashboardFiles.json("influxdb/apihealth-template.json") as? [[String: Any]])
        let allChecks = template.filter { $0["kind"] as? String == "CheckThreshold" }
        let checks = allChecks.filter { (($0["metadata"] as! [String: Any])["name"] as! String).contains("-burn-") }
        #expect(checks.count == 8, "one burn-rate check per objective and window pair")
        let queries = flux.map(\.query) + allChecks.map { ($0["spec"] as! [String: Any])["query"] as! String }
        for query in queries {
            for name in DashboardFiles.matches(#"r\._measurement == "([^"]+)""#, in: query) {
                #expect(DashboardContractTests.measurements.contains(name), "unknown measurement \(name)")
            }
            for name in DashboardFiles.matches(#"r\._field == "([^"]+)""#, in: query) {
                #expect(fields.contains(name), "unknown field \(name)")
            }
            if query.contains("apihealth_request_interval") && !query.hasPrefix("// Reachability")
                && !query.hasPrefix("// Failing steadily")
            {
                // Per endpoint, env and place: instances, status classes and app versions summed, as the vmalert and
                // InfluxQL rules do.
                #expect(
                    query.contains(
                        #"group(columns: ["host", "method", "path", "module", "service", "env", "country", "region", "_measurement", "_field"])"#
                    ),
                    "\(query)"
                )
            }
        }
        for check in checks {
            let spec = check["spec"] as! [String: Any]
            let query = spec["query"] as! String
            let name = (check["metadata"] as! [String: Any])["name"] as! String
            let windows = DashboardFiles.matches(#"range\(start: -([0-9a-z]+)\)"#, in: query)
            #expect(windows.count == 2 && name.hasSuffix("\(windows[0])-\(windows[1])"), "\(name): \(windows)")
            // The slower burn rate of the two windows, only where both have one: the long window only with the
            // guard's minimum traffic.
            #expect(query.contains(#"_field: "burn_over_limit""#) && query.contains("r.windows == 2"))
            #expect(query.contains("r.count > 99.5"), "\(name): the long window's minimum-traffic guard")
            #expect((spec["statusMessageTemplate"] as? String)?.contains("r.country") == true, "\(name)")
            // InfluxDB's check task pivots the fields into columns and tests the one the query's filter names.
            #expect(query.hasSuffix("|> filter(fn: (r) => r._field == \"burn_over_limit\")\n"), "\(name)")
            #expect((spec["statusMessageTemplate"] as? String)?.contains("r.burn_over_limit") == true)
            let thresholds = spec["thresholds"] as! [[String: Any]]
            #expect(thresholds.count == 1 && thresholds[0]["value"] as? Double == 1.0)
        }
        // The checks without objectives: reachability per host and place (transport errors, 5xx) and the
        // failing-steadily ticket, each over its window, guarded, and naming the country.
        let others = Dictionary(
            uniqueKeysWithValues: allChecks.map {
                (($0["metadata"] as! [String: Any])["name"] as! String, $0["spec"] as! [String: Any])
            }.filter { !$0.0.contains("-burn-") }
        )
        #expect(
            Set(others.keys) == [
                "apihealth-reachability-transport-errors", "apihealth-reachability-server-errors",
                "apihealth-failing-steadily",
            ]
        )
        for (name, spec) in others {
            let query = spec["query"] as! String
            let field = name == "apihealth-failing-steadily" ? "failing_over_limit" : "unreachable_over_limit"
            #expect(query.hasSuffix("|> filter(fn: (r) => r._field == \"\(field)\")\n"), "\(name)")
            #expect((spec["statusMessageTemplate"] as? String)?.contains("r.country") == true, "\(name)")
            let windows = DashboardFiles.matches(#"range\(start: -([0-9a-z]+)\)"#, in: query)
            #expect(windows == [name == "apihealth-failing-steadily" ? "6h" : "10m"], "\(name): \(windows)")
            if field == "unreachable_over_limit" {
                #expect(query.contains("r.requests >= 100.0"), "\(name): the minimum-traffic guard")
                #expect(query.contains("r.sources >= 3.0"), "\(name): failures from k installs")
                #expect(query.contains(#"group(columns: ["host_key"])"#), "\(name): the host's share from everywhere")
                #expect(query.contains("elsewhere_requests <= 0.0 or"), "\(name): a host with one place")
            }
        }
        let endpoint = try #require(template.first { $0["kind"] as? String == "NotificationEndpointHTTP" })
        let endpointName = (endpoint["metadata"] as! [String: Any])["name"] as! String
        let rules = template.filter { $0["kind"] as? String == "NotificationRuleHTTP" }
        #expect(rules.count == 2)
        let severities = Set(
            allChecks.flatMap { (($0["spec"] as! [String: Any])["tags"] as! [[String: String]]).map { $0["value"]! } }
        )
        for rule in rules {
            let spec = rule["spec"] as! [String: Any]
            #expect(spec["endpointName"] as? String == endpointName)
            // A notice on the change to the severity's level and one on the recovery: not one a minute while it lasts.
            let level = (spec["statusRules"] as? [[String: String]])?.first?["currentLevel"] ?? ""
            #expect(
                spec["statusRules"] as? [[String: String]] == [
                    ["currentLevel": level, "previousLevel": "OK"], ["currentLevel": "OK", "previousLevel": level],
                ],
                "\(spec)"
            )
            #expect((spec["messageTemplate"] as? String)?.contains("exists r.country") == true)
            let tag = try #require((spec["tagRules"] as? [[String: String]])?.first)
            #expect(severities.contains(tag["value"] ?? ""))
        }
        #expect(severities == ["page", "ticket"])
    }

    /// The annotations call the `query` template function, which replay refuses: vmalert evaluates the shipped
    /// files live over the history ending now, and its page alert for the burning endpoint reads as a person on call
    /// needs it (which objective, how fast, the budget left, from where). The country scenarios are written to end
    /// 40 minutes from now, so BR's requests to the maps host have failed to connect for the last 20 minutes: its
    /// reachability alert names the share failing there and elsewhere and the failing kind.
    @Test func theLiveAnnotationsSayTheObjectiveTheBurnRateTheBudgetLeftAndTheFailingKind() async throws {
        let server = try await VictoriaProcess.victoriaMetrics()
        defer { server.stop() }
        let victoria = VictoriaMetrics(base: server.url)
        let end = Int64(Date().timeIntervalSince1970) / 60 * 60
        for lines in [AlertHistory.lines(end: end), AlertScenarios.lines(end: end + 40 * 60)] {
            let reply = try await victoria.write(lines, precision: "s")
            #expect(reply.status == 204, "\(reply.text)")
        }
        try await victoria.forceFlush()
        let port = try VictoriaProcess.freePort()
        let vmalert = try Child(
            try VictoriaProcess.path(of: "vmalert"),
            try Self.ruleFiles().map { "-rule=\($0.path)" } + [
                "-datasource.url=\(server.url.absoluteString)", "-remoteWrite.url=\(server.url.absoluteString)",
                // Nothing listens there: the alerts are read from vmalert's own API.
                "-notifier.url=http://127.0.0.1:\(try VictoriaProcess.freePort())",
                "-httpListenAddr=127.0.0.1:\(port)", "-loggerLevel=ERROR",
            ]
        )
        defer {
            vmalert.signal(SIGTERM)
            vmalert.process.waitUntilExit()
        }
        // vmalert starts each group after a random delay of up to its interval (1 min); the alerts read what the
        // recording group wrote at its last evaluation.
        var page: [String: Any]?
        var unreachable: [String: Any]?
        let appeared = try await waitUntil(timeout: .seconds(300)) {
            guard vmalert.process.isRunning else { return true }
            guard let reply = try? await HTTP.send("GET", URL(string: "http://127.0.0.1:\(port)/api/v1/alerts")!),
                reply.status == 200,
                let root = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any],
                let alerts = (root["data"] as? [String: Any])?["alerts"] as? [[String: Any]]
            else { return false }
            page = alerts.first {
                $0["name"] as? String == "APIHealthAvailabilityBurnPage"
                    && ($0["labels"] as? [String: String])?["host"] == AlertHistory.burning.host
            }
            unreachable = alerts.first {
                $0["name"] as? String == "APIHealthReachabilityTransportErrors"
                    && ($0["labels"] as? [String: String])?["host"] == "api.maps.example"
            }
            return page != nil && unreachable != nil
        }
        #expect(appeared && vmalert.process.isRunning, "\(vmalert.stderr)")
        let labels = try #require(page?["labels"] as? [String: String])
        var endpoint = labels
        endpoint["alertname"] = nil
        endpoint["alertgroup"] = nil
        #expect(endpoint == AlertHistory.burning.labels.merging(["severity": "page"]) { $1 }, "\(labels)")
        let annotations = try #require(page?["annotations"] as? [String: String])
        let description = annotations["description"] ?? ""
        // 2,400 failed of 10,080,000 requests in the 3.5 days: a burn rate of 0.238 over the 30 days.
        let left = 1 - AlertHistory.burnRate(AlertHistory.burning, latency: false, seconds: AlertHistory.length)
        for phrase in [
            "Page:", "POST https://api.burning.example/v1/pay from region eu-west fail",
            "as the availability objective allows (objective: 99.9% of requests)",
            "Error budget left over the last 30 days: \(String(format: "%.2f", left * 100))%.",
        ] {
            #expect(description.contains(phrase), "\(phrase) in \(description)")
        }
        let burn = try #require(Double(annotations["burn_rate"] ?? ""))
        #expect(burn > 14.4 && burn <= 20, "\(annotations)")
        #expect(
            annotations["summary"]?.hasPrefix("POST api.burning.example/v1/pay burns its availability budget") == true
        )

        var place = try #require(unreachable?["labels"] as? [String: String])
        place["alertgroup"] = nil
        #expect(
            place == [
                "alertname": "APIHealthReachabilityTransportErrors", "severity": "page", "host": "api.maps.example",
                "country": "BR", "service": AlertScenarios.service,
            ],
            "\(place)"
        )
        let told = try #require(unreachable?["annotations"] as? [String: String])
        #expect(told["share_here"] == "100%" && told["share_elsewhere"] == "0%", "\(told)")
        // 60 connect errors a minute over the 10-minute window.
        #expect(told["failing_kind"] == "connect (600 in the last 10m)", "\(told)")
        #expect(told["counts"] == "600 failed of 600 requests", "\(told)")
        #expect(told["places_failing"] == "country BR (100%); ", "\(told)")
        #expect(
            told["summary"]
                == "checkout cannot reach api.maps.example from country BR: 100% of requests get no response",
            "\(told)"
        )
        for phrase in [
            "Requests from checkout to https://api.maps.example made from country BR end in a transport error",
            "100% of them (600 failed of 600 requests) over the last 10m",
            "against 0% of the host's requests from everywhere else", "Most of them: connect (600 in the last 10m).",
            "Failing from this host: country BR (100%); No objective",
        ] {
            #expect(told["description"]?.contains(phrase) == true, "\(phrase) in \(told)")
        }
    }
}
