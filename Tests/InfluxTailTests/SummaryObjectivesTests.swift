import APIHealthSummary
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// The newest interval point of ``objectiveLines``, in seconds since the epoch.
private let newest: Int64 = 1_763_800_000

/// One interval point, with its objectives' fields when given (named as ``PointSchema`` names them).
private func intervalLine(
    _ host: String,
    _ path: String,
    method: String = "GET",
    statusClass: String = "2xx",
    count: Int,
    errors: Int,
    availability: Double? = nil,
    latency: (target: Double, milliseconds: Double, within: Int)? = nil,
    at seconds: Int64
) -> String {
    typealias F = PointSchema.IntervalField
    var fields = ["\(F.count)=\(count)i", "\(F.errors)=\(errors)i"]
    if let availability { fields.append("\(F.objectiveAvailability)=\(availability)") }
    if let latency {
        fields += [
            "\(F.objectiveLatency)=\(latency.target)", "\(F.objectiveLatencyMilliseconds)=\(latency.milliseconds)",
            "\(F.requestsWithinLatencyObjective)=\(latency.within)i",
        ]
    }
    return
        "\(PointSchema.Measurement.requestInterval),host=\(host),method=\(method),module=m,path=\(path),status_class=\(statusClass) \(fields.joined(separator: ",")) \(seconds)000000000"
}

/// Four endpoints whose budgets and burn rates are known (the burn-rate window is the 5 minutes before
/// the newest point, `newest`, which a point stamped exactly 5 minutes earlier is not in):
/// - GET a.example.com/users/{id}, 99.9 % available and 99 % within 300 ms: 3,000 requests, 30 failed, 10
///   slow; budget used 30 / (0.001 × 3,000) = 10 budgets (10×) and 10 / (0.01 × 3,000) = 33 %. In the window (the
///   point 10 s before the newest) 1,000 requests, 20 failed, 10 slow: burn rates 20 (marked !!) and 1.
/// - POST b.example.com/orders, 99 % available, no latency objective: 100 requests, 7 failed, at the newest
///   point: used 7 budgets (7.0×), burn rate 7 (marked !).
/// - GET c.example.com/health: no objective, 50 requests.
/// - GET a.example.com/old, 99.9 % available: 100 requests, none failed, 15 minutes before: used 0 %, no
///   burn rate (no request in the window).
private let objectiveLines: [String] = [
    intervalLine(
        "a.example.com",
        "/users/{id}",
        count: 1_000,
        errors: 0,
        availability: 0.999,
        latency: (0.99, 300, 1_000),
        at: newest - 600
    ),
    intervalLine(
        "a.example.com",
        "/users/{id}",
        count: 1_000,
        errors: 10,
        availability: 0.999,
        latency: (0.99, 300, 1_000),
        at: newest - 300
    ),
    intervalLine(
        "a.example.com",
        "/users/{id}",
        count: 980,
        errors: 0,
        availability: 0.999,
        latency: (0.99, 300, 975),
        at: newest - 10
    ),
    intervalLine(
        "a.example.com",
        "/users/{id}",
        statusClass: "5xx",
        count: 20,
        errors: 20,
        availability: 0.999,
        latency: (0.99, 300, 15),
        at: newest - 10
    ),
    intervalLine("b.example.com", "/orders", method: "POST", count: 93, errors: 0, availability: 0.99, at: newest),
    intervalLine(
        "b.example.com",
        "/orders",
        method: "POST",
        statusClass: "5xx",
        count: 7,
        errors: 7,
        availability: 0.99,
        at: newest
    ),
    intervalLine("c.example.com", "/health", count: 50, errors: 0, at: newest),
    intervalLine("a.example.com", "/old", count: 100, errors: 0, availability: 0.999, at: newest - 900),
]

private func writeObjectiveSpool(_ directory: URL) throws {
    try markAsSpool(directory)
    try Data((objectiveLines.joined(separator: "\n") + "\n").utf8)
        .write(to: directory.appendingPathComponent("00000000000000000001.lp"))
}

/// The cells of the table line that starts with `method` and `endpoint`, split on runs of spaces.
private func cells(_ table: String, _ method: String, _ endpoint: String) -> [String]? {
    table.split(separator: "\n").first { $0.hasPrefix(method + " ") && $0.contains(" \(endpoint) ") }.map {
        $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }
}

/// Whether the JSON value `value` is `expected`, as the summary rounds it (to nine decimals).
private func near(_ value: Any?, _ expected: Double) -> Bool {
    guard let number = (value as? NSNumber)?.doubleValue else { return false }
    return abs(number - expected) <= 1e-9 * max(1, abs(expected))
}

/// Whether the JSON value `value` is exactly `expected` (20 failed of 1,000 at 99.9 % is a burn rate of
/// 20, not 19.999999999999982).
private func exactly(_ value: Any?, _ expected: Double) -> Bool {
    (value as? NSNumber)?.doubleValue == expected
}

/// `influx-tail --summary` with objectives: each objective, the budget used over the spool, the burn rate
/// over its last 5 minutes, and the endpoints burning fastest marked.
@Suite struct SummaryObjectivesTests {
    @Test func tableShowsObjectivesBudgetUsedAndBurnRatesAndMarksTheFastest() async throws {
        let spool = temporaryDirectory("summary-objectives")
        try writeObjectiveSpool(spool)
        let run = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "220"])
        #expect(run.status == 0, "\(run.stderr)")
        let table = run.stdout
        let header = try #require(table.split(separator: "\n").first).split(separator: " ").map(String.init)
        #expect(
            header == [
                "METHOD", "ENDPOINT", "REQS", "ERRS", "ERR%", "P50ms", "P95ms", "P99ms", "AVAIL", "A.USED", "A.BURN5m",
                "LATENCY", "L.USED", "L.BURN5m", "!", "LAST", "PARSE", "P95", "OVER", "TIME",
            ],
            "\(table)"
        )
        // METHOD ENDPOINT REQS ERRS ERR% P50 P95 P99, then the objectives.
        #expect(
            cells(table, "GET", "a.example.com/users/{id}")?.dropFirst(8).prefix(7)
                == ["99.9%", "10×", "20.0", "99%≤300ms", "33%", "1.0", "!!"],
            "\(table)"
        )
        #expect(
            cells(table, "POST", "b.example.com/orders")?.dropFirst(8).prefix(7)
                == ["99%", "7.0×", "7.0", "-", "-", "-", "!"],
            "\(table)"
        )
        #expect(
            cells(table, "GET", "a.example.com/old")?.dropFirst(8).prefix(6) == ["99.9%", "0%", "-", "-", "-", "-"],
            "no request in the last 5 minutes: \(table)"
        )
        #expect(cells(table, "GET", "c.example.com/health")?.dropFirst(8).prefix(6) == ["-", "-", "-", "-", "-", "-"])
        #expect(table.contains("BURN5m: burn rate over their last 5 min"), "the footer says what they are")
        #expect(table.contains("!! burn ≥ 14.4, ! ≥ 6"))
        // Worst first, as without objectives: error % (7, 1, 0, 0), then requests.
        let order = table.split(separator: "\n").dropFirst().prefix(4).map { $0.split(separator: " ")[1] }
        #expect(
            order == ["b.example.com/orders", "a.example.com/users/{id}", "a.example.com/old", "c.example.com/health"]
        )

        let colored = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--summary", "--width", "220", "--color", "always"]
        )
        #expect(colored.stdout.contains("\u{1B}[1;31m    20.0\u{1B}[0m"), "a page rate in red")
        #expect(colored.stdout.contains("\u{1B}[33m     7.0\u{1B}[0m"), "a 6 h page rate in yellow")
        #expect(colored.stdout.contains("\u{1B}[1;31m!!\u{1B}[0m") && colored.stdout.contains("\u{1B}[33m! \u{1B}[0m"))
        #expect(colored.stdout.contains("\u{1B}[1;31m   10×\u{1B}[0m"), "a budget used up in red")
    }

    @Test func jsonCarriesTheObjectivesOfRowsThatHaveThem() async throws {
        let spool = temporaryDirectory("summary-objectives-json")
        try writeObjectiveSpool(spool)
        let (rows, run) = try await summaryRows(["--spool", spool.path, "--sort", "burn"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(
            rows.map { $0["path"] as? String } == ["/users/{id}", "/orders", "/old", "/health"],
            "fastest burn first, rows without an objective last"
        )
        let users = rows[0]
        #expect(near(users["availability_objective"], 0.999))
        #expect(exactly(users["availability_budget_used"], 10), "\(users)")
        #expect(exactly(users["availability_burn_rate"], 20), "\(users)")
        #expect(near(users["latency_objective"], 0.99))
        #expect(near(users["latency_objective_ms"], 300))
        #expect(near(users["latency_budget_used"], 1.0 / 3), "\(users)")
        #expect(exactly(users["latency_burn_rate"], 1), "\(users)")
        #expect(users["burn_window_seconds"] as? Int == 300)
        #expect(users["burn_mark"] as? String == "!!")
        let orders = rows[1]
        #expect(exactly(orders["availability_burn_rate"], 7) && exactly(orders["availability_budget_used"], 7))
        #expect(orders["burn_mark"] as? String == "!")
        #expect(orders["latency_objective"] == nil, "no latency objective: no latency fields")
        let old = rows[2]
        #expect(near(old["availability_budget_used"], 0))
        #expect(old["availability_burn_rate"] is NSNull, "no request in the window")
        #expect(old["burn_mark"] is NSNull)
        #expect(!rows[3].keys.contains { $0.contains("objective") || $0.contains("burn") }, "\(rows[3])")
    }

    @Test func narrowTablesKeepTheBurnRatesAndTheMarkLongest() async throws {
        let spool = temporaryDirectory("summary-objectives-narrow")
        try writeObjectiveSpool(spool)
        func header(_ width: Int) async throws -> String {
            let run = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "\(width)"])
            let lines = run.stdout.split(separator: "\n").map(String.init)
            #expect(lines.allSatisfy { $0.count <= width }, "\(width): \(lines)")
            return lines.first ?? ""
        }
        #expect(
            try await header(60) == "METHOD  ENDPOINT             REQS  ERR%  P99ms  A.BURN5m  !",
            "the objectives, budgets used, p95, errors and latency burn rate left out first"
        )
        let wider = try await header(100)
        #expect(wider.contains("A.BURN5m") && wider.contains("L.BURN5m") && wider.contains("  !"), "\(wider)")
        #expect(!wider.contains("AVAIL") && !wider.contains("LATENCY"), "\(wider)")
        #expect(
            try await header(40) == "METHOD  ENDPOINT       REQS  ERR%  P99ms",
            "at the narrowest, as without objectives"
        )
    }

    @Test func withoutObjectivesTheTableHasNoObjectiveColumns() async throws {
        let spool = temporaryDirectory("summary-no-objectives")
        try await writeKnownSpool(spool)
        let run = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "200"])
        #expect(run.status == 0, "\(run.stderr)")
        let header = run.stdout.split(separator: "\n").first.map(String.init)
        #expect(
            header
                == "METHOD  ENDPOINT                  REQS  ERRS  ERR%  P50ms  P95ms  P99ms  LAST   PARSE  P95 OVER TIME",
            "\(run.stdout)"
        )
        #expect(!run.stdout.contains("USED") && !run.stdout.contains("BURN"), "\(run.stdout)")
        let (rows, _) = try await summaryRows(["--spool", spool.path])
        #expect(rows.allSatisfy { row in !row.keys.contains { $0.contains("objective") || $0.contains("burn") } })
    }

    /// A real agent's interval points: 1,000 requests of one endpoint, 20 failed and 10 slower than 300 ms,
    /// recorded at once (so all of them are in the last 5 minutes).
    @Test func anAgentsObjectivesGiveTheBudgetAndBurnOfItsRequests() async throws {
        let spool = temporaryDirectory("summary-objectives-agent")
        var configuration = APIHealthConfiguration(serviceName: "summary-objectives")
        configuration.spool = SpoolOptions(directory: spool)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        configuration.objectives = ObjectiveOptions(
            default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300)))
        )
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "summary-objectives"))
        agent.start()
        for index in 0..<1_000 {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://a.example.com/users/\(index)")!,
                    module: "accounts",
                    startedAt: Date(),
                    duration: .milliseconds(index % 100 == 0 ? 400 : 20),
                    statusCode: index % 50 == 1 ? 503 : 200
                )
            )
        }
        await agent.shutdown(deadline: .seconds(60))
        let (rows, run) = try await summaryRows(["--spool", spool.path])
        #expect(run.status == 0, "\(run.stderr)")
        let row = try #require(rows.first, "\(run.stdout)")
        #expect(row["requests"] as? Int == 1_000 && row["errors"] as? Int == 20, "\(row)")
        #expect(exactly(row["availability_budget_used"], 20) && exactly(row["availability_burn_rate"], 20), "\(row)")
        #expect(exactly(row["latency_budget_used"], 1) && exactly(row["latency_burn_rate"], 1), "\(row)")
        #expect(row["burn_mark"] as? String == "!!")
    }
}

/// The burn-rate window follows the newest interval point read, and forgets what falls out of it.
@Suite struct BurnWindowTests {
    func point(_ path: String, count: Int, errors: Int, at seconds: Int64) -> [UInt8] {
        Array(intervalLine("h", path, count: count, errors: errors, availability: 0.99, at: seconds).utf8)
    }

    @Test func theWindowEndsAtTheNewestPointAndOlderPointsLeaveIt() {
        var summary = SummaryAggregator()
        // 100 points 10 s apart (over 16½ minutes): 1 % failed until the last 5 minutes, then 5 % (30 points).
        for index in 0..<100 {
            let seconds = newest - Int64(99 - index) * 10
            summary.add(point("/a", count: 100, errors: seconds > newest - 300 ? 5 : 1, at: seconds))
        }
        var row = summary.rows().first { $0.path == "/a" }
        #expect(abs((row?.availability?.burnRate ?? 0) - 5) < 1e-9, "5 % over 1 %: \(String(describing: row))")
        // 30 × 5 + 70 × 1 failed of 10,000 requests: 220 / (0.01 × 10,000).
        #expect(abs((row?.availability?.budgetUsed ?? 0) - 2.2) < 1e-9)
        #expect(row?.burnMark == nil, "5 is below 6")

        // Another endpoint's point 10 minutes on: nothing of /a is in the window any more.
        summary.add(point("/b", count: 10, errors: 0, at: newest + 600))
        row = summary.rows().first { $0.path == "/a" }
        #expect(row?.availability?.burnRate == nil)
        #expect(abs((row?.availability?.budgetUsed ?? 0) - 2.2) < 1e-9, "the budget used stays")
        #expect(summary.rows().first { $0.path == "/b" }?.availability?.burnRate == 0)
    }

    @Test func anObjectiveThatChangedCountsWithTheValueEachPointCarried() {
        var summary = SummaryAggregator()
        summary.add(Array(intervalLine("h", "/a", count: 100, errors: 1, availability: 0.99, at: newest - 20).utf8))
        summary.add(Array(intervalLine("h", "/a", count: 100, errors: 1, availability: 0.999, at: newest).utf8))
        let availability = summary.rows().first?.availability
        #expect(availability?.objective == 0.999, "the newest point's")
        // 2 failed of 0.01 × 100 + 0.001 × 100 allowed.
        #expect(abs((availability?.burnRate ?? 0) - 2 / 1.1) < 1e-9, "\(String(describing: availability))")
    }
}
