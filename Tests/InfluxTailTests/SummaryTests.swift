import APIHealthSummary
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A spool written by a real agent from fixed samples, with the rows they must give:
/// - GET a.example.com/users/{id}: 100 requests of 1…100 ms, every tenth (10, 20, …, 100 ms) a 500;
///   p50 = 50, p95 = 95, p99 = 99 (nearest rank); 2 parse failures; the latest is the 100 ms one, a 500.
/// - POST b.example.com/orders: 5, 7, 9 ms (201) and a 200 ms transport error, the latest;
///   p50 = 7 (rank 2 of 4), p95 = p99 = 200; error 25 %.
/// - GET a.example.com/health: 1, 2, 3 ms, all 200; p50 = 2, p95 = p99 = 3.
func writeKnownSpool(_ directory: URL) async throws {
    var configuration = APIHealthConfiguration(serviceName: "summary-tests")
    configuration.spool = SpoolOptions(directory: directory)
    configuration.selfMetricsInterval = noPeriodicHealthPoint
    // A point for every request: the rows' exact percentiles are read from them.
    configuration.capture.rawPoints = .all
    let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "summary"))
    agent.start()
    let start = Date(timeIntervalSince1970: 1_763_800_000)
    for index in 1...100 {
        agent.record(
            RequestSample(
                method: "GET",
                url: URL(string: "https://a.example.com/users/\(index)")!,
                module: "accounts",
                startedAt: start.addingTimeInterval(Double(index)),
                duration: .milliseconds(index),
                statusCode: index % 10 == 0 ? 500 : 200
            )
        )
    }
    for (offset, milliseconds) in [5, 7, 9].enumerated() {
        agent.record(
            RequestSample(
                method: "POST",
                url: URL(string: "https://b.example.com/orders")!,
                module: "checkout",
                startedAt: start.addingTimeInterval(Double(offset)),
                duration: .milliseconds(milliseconds),
                statusCode: 201
            )
        )
    }
    agent.record(
        RequestSample(
            method: "POST",
            url: URL(string: "https://b.example.com/orders")!,
            module: "checkout",
            startedAt: start.addingTimeInterval(50),
            duration: .milliseconds(200),
            error: RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001)
        )
    )
    for index in 1...3 {
        agent.record(
            RequestSample(
                method: "GET",
                url: URL(string: "https://a.example.com/health")!,
                module: "accounts",
                startedAt: start.addingTimeInterval(Double(index)),
                duration: .milliseconds(index),
                statusCode: 200
            )
        )
    }
    let url = URL(string: "https://a.example.com/users/7")!
    for _ in 0..<2 {
        struct User: Decodable { var id: Int }
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: nil)
        _ = try? agent.decode(
            User.self,
            from: Data("{}".utf8),
            for: URLRequest(url: url),
            response: response,
            module: "accounts"
        )
    }
    await agent.shutdown(deadline: .seconds(60))
}

/// The JSON rows `influx-tail --summary --format json` printed, parsed.
func summaryRows(
    _ arguments: [String]
) async throws -> (rows: [[String: Any]], run: (status: Int32?, stdout: String, stderr: String)) {
    let run = try await Child.run("influx-tail", arguments + ["--summary", "--format", "json"])
    let rows = try run.stdout.split(separator: "\n").map {
        try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
    }
    return (rows, run)
}

@Suite struct SummaryTests {
    @Test func knownSamplesGiveExactCountsErrorRatesAndNearestRankPercentiles() async throws {
        let spool = temporaryDirectory("summary")
        try await writeKnownSpool(spool)
        let (rows, run) = try await summaryRows(["--spool", spool.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(rows.count == 3)
        func row(_ method: String, _ path: String) -> [String: Any]? {
            rows.first { $0["method"] as? String == method && $0["path"] as? String == path }
        }
        let users = try #require(row("GET", "/users/{id}"))
        #expect(users["host"] as? String == "a.example.com")
        #expect(users["requests"] as? Int == 100)
        #expect(users["errors"] as? Int == 10)
        #expect((users["error_percent"] as? NSNumber)?.doubleValue == 10)
        #expect((users["p50_ms"] as? NSNumber)?.doubleValue == 50)
        #expect((users["p95_ms"] as? NSNumber)?.doubleValue == 95)
        #expect((users["p99_ms"] as? NSNumber)?.doubleValue == 99)
        #expect(users["last_status"] as? String == "500", "the 100 ms request started last")
        #expect(users["parse_failures"] as? Int == 2)
        #expect(users["percentiles"] as? String == "exact")
        // 100 s covered: 8 s slots (1, 2, 4, 8 s as it grew), newest at the right; the first slot holds
        // 1…7 ms (p95 = the 7th of 7), the next 8…15 ms, …, the last 96…100 ms.
        #expect(users["slot_seconds"] as? Int == 8)
        let overTime = (users["p95_over_time_ms"] as? [Any])?.map { ($0 as? NSNumber)?.intValue }
        #expect(overTime == [nil, nil, nil] + (0..<12).map { 8 * $0 + 7 } + [100])

        let orders = try #require(row("POST", "/orders"))
        #expect(orders["requests"] as? Int == 4)
        #expect(orders["errors"] as? Int == 1)
        #expect((orders["error_percent"] as? NSNumber)?.doubleValue == 25)
        #expect((orders["p50_ms"] as? NSNumber)?.doubleValue == 7)
        #expect((orders["p95_ms"] as? NSNumber)?.doubleValue == 200)
        #expect((orders["p99_ms"] as? NSNumber)?.doubleValue == 200)
        #expect(orders["last_status"] as? String == "error")
        #expect(orders["parse_failures"] as? Int == 0)

        let health = try #require(row("GET", "/health"))
        #expect(health["requests"] as? Int == 3)
        #expect(health["errors"] as? Int == 0)
        #expect((health["p50_ms"] as? NSNumber)?.doubleValue == 2)
        #expect((health["p95_ms"] as? NSNumber)?.doubleValue == 3)
        #expect((health["p99_ms"] as? NSNumber)?.doubleValue == 3)

        // Worst first: error % (25, 10, 0).
        #expect(rows.map { $0["path"] as? String } == ["/orders", "/users/{id}", "/health"])
    }

    @Test func sortFiltersAndRowLimit() async throws {
        let spool = temporaryDirectory("summary")
        try await writeKnownSpool(spool)
        let byRequests = try await summaryRows(["--spool", spool.path, "--sort", "requests"]).rows
        #expect(byRequests.map { $0["requests"] as? Int } == [100, 4, 3])
        let byP50 = try await summaryRows(["--spool", spool.path, "--sort", "p50"]).rows
        #expect(byP50.map { $0["path"] as? String } == ["/users/{id}", "/orders", "/health"])
        let byName = try await summaryRows(["--spool", spool.path, "--sort", "endpoint"]).rows
        #expect(byName.map { $0["path"] as? String } == ["/health", "/users/{id}", "/orders"])
        let limited = try await summaryRows(["--spool", spool.path, "-n", "1"]).rows
        #expect(limited.map { $0["path"] as? String } == ["/orders"])

        let checkout = try await summaryRows(["--spool", spool.path, "--where", "module=checkout"]).rows
        #expect(checkout.map { $0["path"] as? String } == ["/orders"])
        let failedOnly = try await summaryRows(["--spool", spool.path, "--where", "status=500"]).rows
        #expect(failedOnly.count == 1)
        #expect(failedOnly.first?["requests"] as? Int == 10)
        #expect((failedOnly.first?["p50_ms"] as? NSNumber)?.doubleValue == 50, "10, 20, … 100: rank 5")
        let parseOnly = try await summaryRows(["--spool", spool.path, "--measurement", "apihealth_parse_failure"]).rows
        #expect(parseOnly.count == 1)
        #expect(parseOnly.first?["requests"] as? Int == 0)
        #expect(parseOnly.first?["parse_failures"] as? Int == 2)

        let unknown = try await summaryRows(["--spool", spool.path, "--where", "region=eu"])
        #expect(unknown.rows.isEmpty)
        #expect(unknown.run.status == 0)
        #expect(
            unknown.run.stderr.components(separatedBy: "no line has a tag 'region'").count == 2,
            "warned once: \(unknown.run.stderr)"
        )
    }

    @Test func tableFitsFortyAndTwoHundredColumns() async throws {
        let spool = temporaryDirectory("summary")
        try await writeKnownSpool(spool)
        let wide = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "200"])
        #expect(wide.status == 0)
        let wideLines = wide.stdout.split(separator: "\n").map(String.init)
        #expect(wideLines.allSatisfy { $0.count <= 200 })
        #expect(wideLines[0].hasPrefix("METHOD  ENDPOINT"))
        #expect(
            wideLines[0].contains("P50ms") && wideLines[0].contains("P95 OVER TIME") && wideLines[0].contains("PARSE")
        )
        #expect(wideLines[1].hasPrefix("POST    b.example.com/orders"))
        #expect(
            wideLines.contains {
                $0.hasPrefix("GET     a.example.com/users/{id}") && $0.contains("  10.0") && $0.contains("  500  ")
            }
        )
        #expect(!wide.stdout.contains("\u{1B}["), "no colours off a terminal")
        #expect(wideLines.contains { $0.contains("▁") || $0.contains("█") }, "a sparkline")

        let narrow = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "40"])
        let narrowLines = narrow.stdout.split(separator: "\n").map(String.init)
        #expect(narrowLines.allSatisfy { $0.count <= 40 }, "\(narrowLines)")
        #expect(
            narrowLines[0] == "METHOD  ENDPOINT       REQS  ERR%  P99ms",
            "sparkline, parse, p50, last, errors and p95 left out"
        )
        #expect(
            narrowLines.contains { $0 == "GET     a…/users/{id}   100  10.0   99.0" },
            "the host cut first, the path whole: \(narrowLines)"
        )

        let columns = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--summary"],
            environment: ["COLUMNS": "40"]
        )
        #expect(columns.stdout == narrow.stdout, "$COLUMNS when stdout is not a terminal")
    }

    @Test func tornCorruptAndForeignLinesAreCountedInTheFooter() async throws {
        let spool = temporaryDirectory("summary-bad")
        try markAsSpool(spool)
        let good =
            "apihealth_request,host=h,method=GET,path=/a,status=200 duration_ms=4.0,errors=0i 1700000000000000000\n"
        let foreign =
            "apihealth_request,host=h,method=GET,path=/a,status=200 note=\"no duration\" 1700000000000000001\n"
            + "apihealth_request,host=h,status=200 duration_ms=1.0 1700000000000000002\n"
        let other = "cpu,host=h usage=0.5 1700000000000000003\n"
        try Data(
            (good + "not line protocol\n" + foreign + other + good.replacingOccurrences(of: "4.0", with: "6.0")).utf8
        )
        .write(to: spool.appendingPathComponent("00000000000000000001.lp"))
        try Data((good + "apihealth_request,host=h,method=GET,path=/a du").utf8)
            .write(to: spool.appendingPathComponent("00000000000000000002.lp"))
        let run = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "200"])
        #expect(run.status == 0, "lines left out are not an error for the summary: \(run.stderr)")
        #expect(run.stdout.contains("GET     h/a"))
        #expect(run.stdout.contains("skipped: 1 torn, 1 corrupt, 2 foreign"), "\(run.stdout)")
        #expect(run.stdout.contains("1 other measurements"))
        #expect(run.stdout.contains("3 requests"))

        let json = try await summaryRows(["--spool", spool.path])
        #expect(json.rows.first?["requests"] as? Int == 3)
        #expect(json.run.stderr.contains("1 torn, 1 corrupt, 2 foreign"), "the footer goes to stderr with JSON")

        let missing = try await Child.run("influx-tail", ["--spool", spool.path + "-missing", "--summary"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no spool directory"))
    }

    @Test func followRedrawsWithNewLinesAndStopsCleanly() async throws {
        let spool = temporaryDirectory("summary-follow")
        try markAsSpool(spool)
        func lines(_ count: Int, from start: Int) -> String {
            (start..<start + count).map {
                "apihealth_request,host=h,method=GET,path=/p,status=200 duration_ms=\($0 + 1).0,errors=0i \(1_700_000_000_000_000_000 + $0 * 1_000_000)\n"
            }.joined()
        }
        try Data(lines(5, from: 0).utf8).write(to: spool.appendingPathComponent("00000000000000000001.lp"))
        let tail = try Child("influx-tail", ["--spool", spool.path, "--summary", "-f", "--format", "json"])
        defer { if tail.process.isRunning { tail.signal(SIGKILL) } }
        func requestsSeen() -> [Int] {
            tail.lines.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any])?["requests"] as? Int
            }
        }
        #expect(await waitUntil { !requestsSeen().isEmpty })
        #expect(requestsSeen() == [5])
        let next = spool.appendingPathComponent(".00000000000000000002.tmp")
        try Data(lines(7, from: 5).utf8).write(to: next)
        try FileManager.default.moveItem(at: next, to: spool.appendingPathComponent("00000000000000000002.lp"))
        #expect(await waitUntil { requestsSeen().contains(12) })
        #expect(requestsSeen() == [5, 12], "a new snapshot once the new lines are in")
        tail.signal(SIGINT)
        #expect(await tail.wait() == 0, "Ctrl-C ends the follow loop cleanly")
    }

    @Test func followWaitsForASpoolThatDoesNotExistYet() async throws {
        let spool = temporaryDirectory("summary-later").appendingPathComponent("spool")
        let tail = try Child("influx-tail", ["--spool", spool.path, "-f"])
        defer { if tail.process.isRunning { tail.signal(SIGKILL) } }
        #expect(await waitUntil { tail.stderr.contains("waiting for it") }, "says it waits: \(tail.stderr)")
        #expect(tail.process.isRunning, "waits like tail -F: \(tail.stderr)")
        try FileManager.default.createDirectory(
            at: spool,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        try Data("late v=1i 1\n".utf8).write(to: spool.appendingPathComponent("00000000000000000001.lp"))
        #expect(await waitUntil { tail.stdout.contains("late v=1i 1") })
        #expect(tail.stdout == "late v=1i 1\n")
        tail.signal(SIGTERM)
        #expect(await tail.wait() != nil)
    }

    @Test func tableSortsByTimestampAndAnUnknownWhereKeyIsSaidOnce() async throws {
        let spool = temporaryDirectory("summary-order")
        try markAsSpool(spool)
        try Data("m v=3i 3000000000\nm v=1i 1000000000\nm v=2i 2000000000\n".utf8)
            .write(to: spool.appendingPathComponent("00000000000000000001.lp"))
        let table = try await Child.run("influx-tail", ["--spool", spool.path, "--format", "table"])
        let values = table.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
        #expect(values == ["v=1i", "v=2i", "v=3i"], "\(table.stdout)")
        let lines = try await Child.run("influx-tail", ["--spool", spool.path])
        #expect(lines.stdout == "m v=3i 3000000000\nm v=1i 1000000000\nm v=2i 2000000000\n", "line format: send order")

        let unknown = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--where", "region=eu", "--where", "region=us"]
        )
        #expect(unknown.status == 0)
        #expect(unknown.stdout.isEmpty)
        #expect(unknown.stderr.components(separatedBy: "no line has a tag 'region'").count == 2, "\(unknown.stderr)")
    }

    @Test func usageErrorsHintAtHelpOnceAndHelpKeepsPhrasesWhole() async throws {
        let usage = try await Child.run("influx-tail", ["--spool", "/tmp", "--sort", "fastest"])
        #expect(usage.status == 2)
        #expect(usage.stderr.components(separatedBy: "--help").count == 2, "one hint: \(usage.stderr)")
        let help = try await Child.run("influx-tail", ["--help"])
        let text = help.stdout.replacingOccurrences(of: "\n", with: "⏎")
        #expect(text.contains("a corrupt segment"), "not broken inside a phrase")
        #expect(help.stdout.contains("nearest-rank"))
    }

    /// Runs `influx-tail` on a real pseudo-terminal, returning what the terminal received.
    func underTerminal(_ arguments: [String], environment: [String: String?] = [:]) async throws -> String {
        let (status, screen) = await (try TerminalChild("influx-tail", arguments, environment: environment)).finish()
        #expect(status == 0, "\(screen.debugDescription)")
        return screen
    }

    @Test func onATerminalColoursAndLiveRedrawRestoreTheScreen() async throws {
        let spool = temporaryDirectory("summary-pty")
        try markAsSpool(spool)
        let lines = (0..<20).map { index in
            "apihealth_request,host=h,method=GET,path=/slow,status=\(index < 4 ? 500 : 200) duration_ms=\(1_000 + index).0,errors=\(index < 4 ? 1 : 0)i \(1_700_000_000_000_000_000 + index)\n"
        }
        try Data(lines.joined().utf8).write(to: spool.appendingPathComponent("00000000000000000001.lp"))
        let arguments = ["--spool", spool.path, "--summary"]

        let colored = try await underTerminal(arguments)
        #expect(colored.contains("\u{1B}[1;31m20.0\u{1B}[0m"), "error % past 5 % in red: \(colored.debugDescription)")
        #expect(colored.contains("\u{1B}[1;31m 1019\u{1B}[0m"), "p99 past 1000 ms in red")
        let plain = try await underTerminal(arguments, environment: ["NO_COLOR": "1"])
        #expect(!plain.contains("\u{1B}["), "NO_COLOR: \(plain.debugDescription)")
        #expect(plain.contains("GET     h/slow"))
        let never = try await underTerminal(arguments + ["--color", "never"])
        #expect(!never.contains("\u{1B}["))

        // Live: the alternate screen and a hidden cursor, redrawn in place; SIGTERM restores both. Ended
        // once it has redrawn twice, however long it took to start.
        let run = try TerminalChild("influx-tail", arguments + ["-f"])
        #expect(
            await waitUntil { run.screen.components(separatedBy: "\u{1B}[H").count >= 3 },
            "\(run.screen.debugDescription)"
        )
        run.signal(SIGTERM)
        let (status, live) = await run.finish()
        #expect(status == 0, "\(live.debugDescription)")
        #expect(live.contains("\u{1B}[?1049h\u{1B}[?25l"), "enters the alternate screen, hides the cursor")
        #expect(live.components(separatedBy: "\u{1B}[H").count >= 3, "redrawn in place at least twice")
        #expect(live.contains("\u{1B}[?25h\u{1B}[?1049l"), "restores the cursor and the screen")
        let restoredAt = try #require(live.range(of: "\u{1B}[?1049l"))
        #expect(live[restoredAt.upperBound...].contains("h/slow"), "the last table stays on the normal screen")
    }
}
