import Foundation
import APIHealth
import LineProtocol
import TestSupport
import Testing

@Suite struct DemoTests {
    @Test func sigtermFlushesEverythingBeforeExit() async throws {
        let influx = try await InfluxDB1.freshDatabase("demo")
        let spool = temporaryDirectory("demo")
        let demo = try Child(
            "apihealth-demo",
            ["--duration", "120", "--rate", "60"],
            environment: [
                "INFLUX_URL": influx.base.absoluteString, "INFLUX_WRITE_API": "v1", "INFLUX_DATABASE": influx.database,
                "APIHEALTH_SPOOL_DIR": spool.path, "APIHEALTH_FLUSH_DELAY_MS": "60000",
            ]
        )
        // Stopped once more than 60 requests are in its spool (it sends nothing before SIGTERM), however
        // long it took to start.
        #expect(
            await waitUntil {
                let lines = (try? SpoolReader(directory: spool).segments().flatMap(\.lines)) ?? []
                return lines.filter { $0.starts(with: Array("apihealth_request,".utf8)) }.count > 60
            }
        )
        demo.signal(SIGTERM)
        let status = await demo.wait()
        #expect(status == 0, "\(demo.stderr)")
        let summary = demo.stdout
        func number(_ label: String) -> Int? {
            summary.split(separator: "\n").first { $0.contains(label) }.flatMap {
                Int($0.split(separator: " ").last ?? "")
            }
        }
        let requests = try #require(number("requests"))
        #expect(requests > 60, "the demo made more than 60 requests before SIGTERM")
        #expect(number("points pending") == 0)
        #expect(number("points dropped") == 0)
        let counted = try await influx.query("SELECT count(duration_ms) FROM apihealth_request")
        #expect(
            (counted.first?.rows.first?["count"] as? NSNumber)?.intValue == requests,
            "every request is stored after SIGTERM"
        )
        let failures = try await influx.query("SELECT count(\"count\") FROM apihealth_parse_failure")
        #expect(
            (failures.first?.rows.first?["count"] as? NSNumber)?.intValue == number("parse failures") ?? -1
                || number("parse failures") == 0
        )
        #expect(try SpoolReader(directory: spool).segments().allSatisfy { $0.lines.isEmpty })
        // The demo's own swift-metrics, the last values written at shutdown.
        let calls = try await influx.query(#"SELECT last("count") FROM "demo_calls" GROUP BY "module""#)
        #expect(
            calls.count == 3
                && calls.compactMap { ($0.rows.first?["last"] as? NSNumber)?.intValue }.reduce(0, +) == requests
        )
        let timed = try await influx.query(
            #"SELECT sum("count") FROM "demo_call_duration" WHERE "metric_type" = 'timer'"#
        )
        #expect((timed.first?.rows.first?["sum"] as? NSNumber)?.intValue == requests)
        let inFlight = try await influx.query(#"SELECT last("value") FROM "demo_calls_in_flight" GROUP BY "module""#)
        #expect(inFlight.count == 3 && inFlight.allSatisfy { ($0.rows.first?["last"] as? NSNumber)?.doubleValue == 0 })
    }

    /// The table at the end of the demo's output (from its header line on).
    func closingTable(_ output: String) -> String? {
        output.range(of: "METHOD  ENDPOINT").map { String(output[$0.lowerBound...]) }
    }

    func number(_ label: String, in output: String) -> Int? {
        output.split(separator: "\n").first { $0.hasPrefix("  " + label) }.flatMap {
            Int($0.split(separator: " ").last ?? "")
        }
    }

    @Test func closingTableIsWhatInfluxTailSummaryPrintsForTheSameSpool() async throws {
        let spool = temporaryDirectory("demo-table")
        let environment = ["APIHEALTH_SPOOL_DIR": spool.path, "COLUMNS": "150", "INFLUX_URL": ""]
        let demo = try await Child.run("apihealth-demo", ["--duration", "2", "--rate", "40"], environment: environment)
        #expect(demo.status == 0, "\(demo.stderr)")
        let table = try #require(closingTable(demo.stdout), "\(demo.stdout)")
        let tail = try await Child.run("influx-tail", ["--spool", spool.path, "--summary"], environment: environment)
        #expect(tail.status == 0)
        #expect(table == tail.stdout)
        // The summary's lines, up to the "What to cache" section (whose advice lines name endpoints too).
        let lines = table.split(separator: "\n").prefix { !$0.hasPrefix("What to cache") }
        #expect(lines.dropFirst().prefix(5).allSatisfy { $0.hasPrefix("GET ") || $0.hasPrefix("POST ") }, "\(table)")
        #expect(
            lines.dropFirst(6).allSatisfy { !$0.hasPrefix("GET ") && !$0.hasPrefix("POST ") },
            "header, the five endpoints, the footer: \(table)"
        )
        let requests = try #require(number("requests", in: demo.stdout))
        #expect(table.contains("\(requests) requests"), "every request is a row's request: \(table)")

        // A second run on the same spool: the first run's points are leftovers, shown apart.
        let pending = try #require(number("points pending", in: demo.stdout))
        let again = try await Child.run(
            "apihealth-demo",
            ["--duration", "1", "--rate", "40"],
            environment: environment.merging(["APIHEALTH_INSTANCE": "second-run"]) { $1 }
        )
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            again.stdout.contains(
                "from earlier runs: \(pending) points were in the spool at start, \(pending) still pending"
            )
        )
        let secondRequests = try #require(number("requests", in: again.stdout))
        // This run's requests, parse failures, interval points, its health points, and its own
        // swift-metrics: a counter, a meter and a timer for each of the three modules at shutdown, and
        // again at each 10 s interval end the run crossed (ends are on the wall clock: a run of a second
        // or two crosses one now and then), with a health point. Counted in the spool by its instance.
        let thisRun = try SpoolReader(directory: spool).segments().flatMap(\.lines)
            .map { String(decoding: $0, as: UTF8.self) }.filter { $0.contains(",instance=second-run") }
        let healthPoints = thisRun.filter { $0.hasPrefix("apihealth_agent,") }.count
        let metricsPoints = thisRun.filter { !$0.hasPrefix("apihealth_") }.count
        #expect(healthPoints >= 1 && metricsPoints >= 3 * 3, "\(healthPoints), \(metricsPoints)")
        #expect(
            number("points pending", in: again.stdout) == secondRequests
                + (number("parse failures", in: again.stdout) ?? 0)
                + (number("interval points", in: again.stdout) ?? -1_000) + healthPoints + metricsPoints,
            "this run's points only"
        )
        let secondTable = try #require(closingTable(again.stdout))
        #expect(secondTable.contains("\(secondRequests) requests"))
        #expect(secondTable.contains("from earlier runs"))
    }

    /// The closing table's rows, each a map from column title to cell (for a table wide enough that no
    /// column is left out and no cell is empty; the sparkline's title is its first word, P95).
    func tableRows(_ table: String) -> [[String: String]] {
        // The table's lines, up to the "What to cache" section (whose advice lines start with a method
        // too, and appear only when the run's timing gave the advisor something to say).
        let lines = table.split(separator: "\n").prefix {
            !$0.trimmingCharacters(in: .whitespaces).hasPrefix("What to cache")
        }
        guard let header = lines.first?.split(separator: " ").map(String.init) else { return [] }
        return lines.dropFirst().compactMap { line in
            let cells = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard cells.count > 2, ["GET", "POST"].contains(cells[0]) else { return nil }
            return Dictionary(zip(header, cells)) { first, _ in first }
        }
    }

    /// The requests of the closing table's rows, summed.
    func tableRequests(_ table: String) -> Int {
        tableRows(table).reduce(0) { $0 + (Int($1["REQS"] ?? "") ?? 0) }
    }

    /// Lines delivered (and removed from the spool) before the demo read them are still in its table: it
    /// counts every request from the agent's interval points.
    @Test func theClosingTableShowsEveryRequestMadeWhenLinesWereDeliveredFirst() async throws {
        let influx = try await InfluxDB1.freshDatabase("demo_delivered")
        let spool = temporaryDirectory("demo-delivered")
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "4", "--rate", "80"],
            environment: [
                "INFLUX_URL": influx.base.absoluteString, "INFLUX_WRITE_API": "v1", "INFLUX_DATABASE": influx.database,
                "APIHEALTH_SPOOL_DIR": spool.path, "APIHEALTH_FLUSH_DELAY_MS": "20", "COLUMNS": "200",
            ]
        )
        #expect(demo.status == 0, "\(demo.stderr)")
        let requests = try #require(number("requests", in: demo.stdout))
        let table = try #require(closingTable(demo.stdout), "\(demo.stdout)")
        #expect(tableRequests(table) == requests, "\(requests) requests made: \(table)")
        #expect(table.contains(" \(requests) requests · "), "the footer's total is the rows': \(table)")
        let stored = try await influx.query("SELECT count(duration_ms) FROM apihealth_request")
        #expect((stored.first?.rows.first?["count"] as? NSNumber)?.intValue == requests)
    }

    /// Shipping to a real VictoriaMetrics that goes away for part of the run and comes back on the same
    /// port and data: the closing table shows exactly the requests the demo made (lines delivered and
    /// removed from the spool before the demo read them included), and VictoriaMetrics ends up holding
    /// exactly them too. The run is ended with SIGTERM once delivery has resumed, so the outage sits inside
    /// it however slow the machine is; the count checked is the one the demo says it made.
    @Test func throughAnOutageTheClosingTableAndVictoriaMetricsHoldExactlyTheRequestsMade() async throws {
        let victoria = try await VictoriaProcess.victoriaMetrics()
        let stored = VictoriaMetrics(base: victoria.url)
        let spool = temporaryDirectory("demo-outage")
        // 10 requests a second and a 50 ms debounce: batches go out as the traffic pauses, not at 30 s.
        let demo = try Child(
            "apihealth-demo",
            ["--duration", "120", "--rate", "10"],
            environment: [
                "INFLUX_URL": victoria.url.absoluteString, "INFLUX_ORG": "o", "INFLUX_BUCKET": "b",
                "INFLUX_TOKEN": "t", "APIHEALTH_SPOOL_DIR": spool.path, "APIHEALTH_FLUSH_DELAY_MS": "50",
                "APIHEALTH_SHUTDOWN_DEADLINE_MS": "30000", "COLUMNS": "300",
            ]
        )
        defer { if demo.process.isRunning { demo.signal(SIGKILL) } }
        /// Raw request points VictoriaMetrics holds (0 while it is down).
        func storedRequestPoints() async -> Int {
            ((try? await stored.export(namePattern: "apihealth_request_duration_ms")) ?? []).reduce(0) {
                $0 + $1.values.count
            }
        }
        func pendingRequestLines() -> Int {
            ((try? SpoolReader(directory: spool).segments().flatMap(\.lines)) ?? []).filter {
                $0.starts(with: Array("apihealth_request,".utf8))
            }.count
        }
        #expect(await waitUntil { await storedRequestPoints() > 0 }, "shipping before the outage: \(demo.stderr)")
        let beforeOutage = await storedRequestPoints()
        victoria.stop()
        // The outage lasts until 2 s of requests more wait in the spool.
        let pendingAtStop = pendingRequestLines()
        #expect(await waitUntil { pendingRequestLines() >= pendingAtStop + 20 }, "lines pile up while it is down")
        try await victoria.start()
        #expect(
            await waitUntil { await storedRequestPoints() >= beforeOutage + 20 },
            "delivery resumes: what piled up is delivered"
        )
        demo.signal(SIGTERM)
        #expect(await demo.wait() == 0, "\(demo.stderr)")
        let requests = try #require(number("requests", in: demo.stdout), "\(demo.stdout)")
        #expect(requests > 40)
        #expect(number("points pending", in: demo.stdout) == 0, "\(demo.stdout)")
        #expect(number("points lost", in: demo.stdout) == 0 && number("points dropped", in: demo.stdout) == 0)
        let table = try #require(closingTable(demo.stdout), "\(demo.stdout)")
        #expect(tableRequests(table) == requests, "\(requests) requests made: \(table)")
        #expect(table.contains(" \(requests) requests · "), "the footer's total is the rows': \(table)")
        // Every request is in exactly one interval point.
        func storedIntervalRequests() async -> Int? {
            guard let series = try? await stored.export(namePattern: "apihealth_request_interval_count") else {
                return nil
            }
            return Int(series.flatMap(\.values).reduce(0, +))
        }
        let delivered = await waitUntil { await storedIntervalRequests() == requests }
        let held = await storedIntervalRequests()
        #expect(delivered, "VictoriaMetrics holds \(String(describing: held)) of \(requests) requests")
        #expect(try await stored.invalidRows() == 0)
    }

    /// The demo sets objectives unless the environment does: its table shows, per endpoint, each
    /// objective, the budget used and the burn rate of the interval points it wrote (all within the last 5
    /// minutes, so both are the same share), and marks the endpoints burning fastest.
    @Test func theClosingTableShowsTheObjectivesBudgetsAndBurnRatesOfItsIntervalPoints() async throws {
        let spool = temporaryDirectory("demo-objectives")
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "2", "--rate", "40"],
            environment: ["APIHEALTH_SPOOL_DIR": spool.path, "COLUMNS": "300", "INFLUX_URL": ""]
        )
        #expect(demo.status == 0, "\(demo.stderr)")
        let table = try #require(closingTable(demo.stdout), "\(demo.stdout)")
        let header = table.prefix { $0 != "\n" }.split(separator: " ").map(String.init)
        let first = try #require(header.firstIndex(of: "AVAIL"), "\(table)")
        #expect(
            Array(header[first...].prefix(7)) == ["AVAIL", "A.USED", "A.BURN5m", "LATENCY", "L.USED", "L.BURN5m", "!"]
        )
        // What the interval points say, per endpoint (method and host + path).
        var totals: [String: (count: Double, errors: Double, within: Double)] = [:]
        for line in try SpoolReader(directory: spool).segments().flatMap(\.lines) {
            guard let point = try LineParser().parseLine(line), point.measurement == "apihealth_request_interval"
            else { continue }
            func field(_ key: String) -> Double {
                switch point.fields.first(where: { $0.key == key })?.value {
                case .int(let value)?: return Double(value)
                case .float(let value)?: return value
                default: return -1
                }
            }
            #expect(field("objective_availability") == 0.999 && field("objective_latency") == 0.99)
            #expect(field("objective_latency_ms") == 300)
            let key = "\(point.tag("method") ?? "") \(point.tag("host") ?? "")\(point.tag("path") ?? "")"
            var sum = totals[key] ?? (0, 0, 0)
            sum.count += field("count")
            sum.errors += field("errors")
            sum.within += field("requests_within_latency_objective")
            totals[key] = sum
        }
        #expect(totals.count == 5, "\(totals)")
        /// Whether `cell` shows `value` (a share) as the table rounds it: a burn rate as it is; a budget used
        /// (`budget`) below the whole budget as a percentage, from it on as budgets (`67×`).
        func shows(_ cell: String, _ value: Double, budget: Bool) -> Bool {
            let inBudgets = budget && value >= 1
            guard budget ? (inBudgets ? cell.hasSuffix("×") : cell.hasSuffix("%")) : true,
                let shown = Double(cell.replacingOccurrences(of: "%", with: "").replacingOccurrences(of: "×", with: ""))
            else { return false }
            let expected = budget && !inBudgets ? value * 100 : value
            let step =
                inBudgets
                ? (expected < 9.95 ? 0.1 : 1) : budget ? (expected < 9.95 ? 0.1 : 1) : (expected < 0.1 ? 0.01 : 0.1)
            return abs(shown - expected) <= step / 2 + 1e-9
        }
        for (endpoint, sum) in totals {
            let row = try #require(
                table.split(separator: "\n").first {
                    $0.hasPrefix(endpoint.split(separator: " ")[0] + " ")
                        && $0.contains(" \(endpoint.split(separator: " ")[1]) ")
                },
                "\(endpoint): \(table)"
            )
            let cells = row.split(separator: " ").map(String.init)
            let objectives = Array(cells[first...].prefix(7))
            let availability = sum.errors / (0.001 * sum.count)
            let latency = (sum.count - sum.within) / (0.01 * sum.count)
            #expect(objectives[0] == "99.9%" && objectives[3] == "99%≤300ms", "\(row)")
            #expect(shows(objectives[1], availability, budget: true), "\(endpoint) \(sum): \(row)")
            #expect(shows(objectives[2], availability, budget: false), "\(endpoint) \(sum): \(row)")
            #expect(shows(objectives[4], latency, budget: true), "\(endpoint) \(sum): \(row)")
            #expect(shows(objectives[5], latency, budget: false), "\(endpoint) \(sum): \(row)")
            let burn = max(availability, latency)
            let mark = burn >= 14.4 ? "!!" : burn >= 6 ? "!" : nil
            #expect(
                (objectives.count > 6 && ["!", "!!"].contains(objectives[6]) ? objectives[6] : nil) == mark,
                "\(row)"
            )
        }

        // Objectives from the environment replace the demo's; without any, the table has no objective column.
        let fromEnvironment = try await Child.run(
            "apihealth-demo",
            ["--duration", "1", "--rate", "20"],
            environment: [
                "APIHEALTH_SPOOL_DIR": temporaryDirectory("demo-objectives-env").path, "COLUMNS": "300",
                "INFLUX_URL": "", "APIHEALTH_OBJECTIVE_AVAILABILITY": "99",
            ]
        )
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        let ownTable = try #require(closingTable(fromEnvironment.stdout), "\(fromEnvironment.stdout)")
        #expect(
            ownTable.contains("AVAIL") && !ownTable.contains("LATENCY") && ownTable.contains(" 99% "),
            "\(ownTable)"
        )
        let none = try await Child.run(
            "apihealth-demo",
            ["--duration", "1", "--rate", "20", "--no-default-objectives"],
            environment: [
                "APIHEALTH_SPOOL_DIR": temporaryDirectory("demo-objectives-none").path, "COLUMNS": "300",
                "INFLUX_URL": "",
            ]
        )
        #expect(none.status == 0, "\(none.stderr)")
        let plain = try #require(closingTable(none.stdout), "\(none.stdout)")
        #expect(!plain.contains("AVAIL") && !plain.contains("BURN") && !plain.contains("USED"), "\(plain)")
    }

    /// Three countries, one agent each, the API unreachable from one: every row is an endpoint in a
    /// country, the unreachable country's requests all fail to connect (its interval points count them as
    /// connect errors) under the same host as the others', the others' do not, and the footer's total is
    /// the rows' total and the requests the demo made.
    @Test func asSeveralCountriesWithTheAPIUnreachableFromOneEachCountryHasItsRows() async throws {
        let directory = temporaryDirectory("demo-countries")
        let spool = directory.appendingPathComponent("spool")
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "3", "--rate", "60", "--countries", "BR,de,US", "--unreachable-from", "br"],
            environment: ["APIHEALTH_SPOOL_DIR": spool.path, "COLUMNS": "300", "INFLUX_URL": ""]
        )
        #expect(demo.status == 0, "\(demo.stderr)")
        let table = try #require(closingTable(demo.stdout), "\(demo.stdout)")
        let header = table.prefix { $0 != "\n" }
        #expect(header.hasPrefix("METHOD  ENDPOINT") && header.contains("  COUNTRY  REQS  "), "\(table)")
        let rows = tableRows(table)
        #expect(rows.count == 15, "five endpoints in each of three countries: \(table)")
        var hosts: Set<String> = []
        for country in ["BR", "DE", "US"] {
            let own = rows.filter { $0["COUNTRY"] == country }
            #expect(own.count == 5, "\(country): \(table)")
            for row in own {
                let requests = try #require(Int(row["REQS"] ?? ""))
                let errors = try #require(Int(row["ERRS"] ?? ""))
                #expect(requests > 0, "\(row)")
                if country == "BR" {
                    #expect(errors == requests && row["LAST"] == "error", "every BR request fails: \(row)")
                } else {
                    #expect(errors < requests, "\(country) reaches the API: \(row)")
                }
                if let endpoint = row["ENDPOINT"], let slash = endpoint.firstIndex(of: "/") {
                    hosts.insert(String(endpoint[..<slash]))
                }
            }
        }
        #expect(hosts.count == 1, "one host for every country: \(hosts)")
        let made = try #require(number("requests", in: demo.stdout), "\(demo.stdout)")
        #expect(tableRequests(table) == made, "\(made) requests made: \(table)")
        #expect(table.contains(" \(made) requests · "), "the footer's total is the rows': \(table)")

        // Each country's own spool: its interval points carry its country; BR's count only connect errors,
        // under the API's host.
        for country in ["BR", "DE", "US"] {
            let lines = try SpoolReader(directory: directory.appendingPathComponent("spool-\(country)")).segments()
                .flatMap(\.lines)
            var count = 0
            var connectErrors = 0
            for line in lines {
                guard let point = try LineParser().parseLine(line), point.measurement == "apihealth_request_interval"
                else { continue }
                #expect(point.tag("country") == country)
                #expect(
                    point.tag("host").map { hosts.contains($0) } == true,
                    "\(String(describing: point.tag("host")))"
                )
                func field(_ key: String) -> Int {
                    if case .int(let value)? = point.fields.first(where: { $0.key == key })?.value { return Int(value) }
                    return 0
                }
                count += field("count")
                connectErrors += field("errors_connect")
            }
            #expect(count > 0, "\(country)")
            #expect(connectErrors == (country == "BR" ? count : 0), "\(country): \(connectErrors) of \(count)")
        }
    }

    @Test func countriesAndTheUnreachableOneAreCheckedBeforeTheRun() async throws {
        for (arguments, message) in [
            (["--countries", "BR,XX"], "'XX' is not an ISO 3166-1 alpha-2 country code"),
            (
                ["--countries", "BR,DE", "--unreachable-from", "US"],
                "--unreachable-from US must name one of --countries"
            ),
            (["--unreachable-from", "BR"], "--unreachable-from BR must name one of --countries"),
            (["--countries", "BR,br"], "--countries: BR twice"),
        ] {
            let run = try await Child.run(
                "apihealth-demo",
                ["--duration", "1"] + arguments,
                environment: ["APIHEALTH_SPOOL_DIR": "none", "INFLUX_URL": ""]
            )
            #expect(run.status == 64, "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
    }

    /// With `APIHEALTH_ENABLED=0` the demo runs as the enabled one does, with or without a spool
    /// directory: no spool is made, nothing is warned of, nothing is counted lost.
    @Test func aDisabledAgentRunsTheDemoWithOrWithoutASpoolDirectory() async throws {
        let spool = temporaryDirectory("demo-disabled").appendingPathComponent("spool")
        for directory in [spool.path, "none"] {
            let demo = try await Child.run(
                "apihealth-demo",
                ["--duration", "1", "--rate", "20"],
                environment: ["APIHEALTH_ENABLED": "0", "APIHEALTH_SPOOL_DIR": directory, "INFLUX_URL": ""]
            )
            #expect(demo.status == 0, "\(directory): \(demo.stderr)")
            #expect(!demo.stderr.contains("warning"), "\(directory): \(demo.stderr)")
            #expect(number("requests", in: demo.stdout) ?? 0 > 0, "\(directory): \(demo.stdout)")
            #expect(number("points pending", in: demo.stdout) == 0, "\(directory): \(demo.stdout)")
            #expect(number("points lost", in: demo.stdout) ?? 0 == 0, "\(directory): \(demo.stdout)")
            #expect(!demo.stdout.contains("pending in the spool"), "\(directory): \(demo.stdout)")
            #expect(demo.stdout.contains("disabled"), "\(directory): \(demo.stdout)")
        }
        #expect(!FileManager.default.fileExists(atPath: spool.path), "no spool is made")
    }

    /// Points that are neither delivered nor kept on disk at exit are lost, not pending: with no spool and
    /// no destination, every point of the run is counted lost and none pending.
    @Test func pendingAndLostAddUpInTheSummary() async throws {
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "1", "--rate", "40"],
            environment: ["APIHEALTH_SPOOL_DIR": "none", "INFLUX_URL": ""]
        )
        #expect(demo.status == 0, "\(demo.stderr)")
        #expect(!demo.stdout.contains("spool at") && !demo.stdout.contains("in the spool)"), "\(demo.stdout)")
        #expect(demo.stdout.contains("nowhere (pending in memory only (APIHEALTH_SPOOL_DIR=none): lost at exit)"))
        let requests = try #require(number("requests", in: demo.stdout), "\(demo.stdout)")
        let failures = number("parse failures", in: demo.stdout) ?? 0
        #expect(number("points pending", in: demo.stdout) == 0, "\(demo.stdout)")
        // Its requests, parse failures, interval points, and the periodic points: at shutdown the health point
        // and swift-metrics (a counter, a meter and a timer per module); for each 10 s interval end the run
        // crossed on a loaded machine, one more health point and the metrics that changed since the last
        // report. A one-second run crosses at most two ends unless it takes over 20 s.
        let intervals = try #require(number("interval points", in: demo.stdout), "\(demo.stdout)")
        #expect(intervals > 0)
        let lost = try #require(number("points lost", in: demo.stdout), "\(demo.stdout)")
        let periodic = lost - (requests + failures + intervals)
        #expect(periodic >= 1 + 3 * 3 && periodic <= 3 * (1 + 3 * 3), "\(demo.stdout)")
    }

    @Test func aDestinationThatCannotBeReachedIsWarnedOnceWithTheReason() async throws {
        let spool = temporaryDirectory("demo-dead")
        let dead = try RefusingPort()
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "2", "--rate", "20"],
            environment: [
                "APIHEALTH_SPOOL_DIR": spool.path, "INFLUX_URL": dead.url.absoluteString, "INFLUX_ORG": "o",
                "INFLUX_BUCKET": "b",
                "INFLUX_TOKEN": "t", "APIHEALTH_FLUSH_DELAY_MS": "300",
            ]
        )
        withExtendedLifetime(dead) {}
        #expect(demo.status == 0, "\(demo.stderr)")
        let warnings = demo.stderr.split(separator: "\n").filter {
            $0.contains("warning") && $0.contains("cannot send to \(dead.url.absoluteString)")
        }
        #expect(warnings.count == 1, "\(demo.stderr)")
        #expect(warnings.first?.contains("connect") == true, "says why: \(demo.stderr)")
        #expect(warnings.first?.contains("points stay pending in the spool at \(spool.path)") == true, "\(demo.stderr)")
        #expect(number("points written", in: demo.stdout) == 0)
    }

    /// Without a spool, the demo never says lines are in one: they wait in memory and are lost at exit.
    @Test func withoutASpoolTheWarningSaysPointsWaitInMemory() async throws {
        let dead = try RefusingPort()
        let demo = try await Child.run(
            "apihealth-demo",
            ["--duration", "2", "--rate", "20"],
            environment: [
                "APIHEALTH_SPOOL_DIR": "none", "INFLUX_URL": dead.url.absoluteString, "INFLUX_ORG": "o",
                "INFLUX_BUCKET": "b", "INFLUX_TOKEN": "t", "APIHEALTH_FLUSH_DELAY_MS": "300",
                "APIHEALTH_SHUTDOWN_DEADLINE_MS": "500",
            ]
        )
        withExtendedLifetime(dead) {}
        #expect(demo.status == 0, "\(demo.stderr)")
        let warning = demo.stderr.split(separator: "\n").first { $0.contains("cannot send to") }
        #expect(
            warning?.contains("points stay pending in memory only (APIHEALTH_SPOOL_DIR=none): lost at exit") == true,
            "\(demo.stderr)"
        )
        #expect(!(demo.stdout + demo.stderr).contains("in the spool"), "\(demo.stdout)\n\(demo.stderr)")
    }

    @Test func helpNamesEveryDestinationVariable() async throws {
        let help = try await Child.run("apihealth-demo", ["--help"])
        for name in [
            "INFLUX_URL", "INFLUX_WRITE_API", "INFLUX_ORG", "INFLUX_BUCKET", "INFLUX_TOKEN", "INFLUX_DATABASE",
            "APIHEALTH_SPOOL_DIR",
        ] {
            #expect(help.stdout.contains(name), "\(name)")
        }
    }

    @Test func onATerminalAStatusLineShowsProgress() async throws {
        let spool = temporaryDirectory("demo-pty")
        let run = try TerminalChild(
            "apihealth-demo",
            ["--duration", "2", "--rate", "20"],
            environment: ["APIHEALTH_SPOOL_DIR": spool.path, "INFLUX_URL": nil, "TERM": "xterm"]
        )
        let (status, screen) = await run.finish()
        #expect(status == 0, "\(screen.debugDescription)")
        #expect(screen.contains("\r1s/2s  requests "), "\(screen.debugDescription)")
        #expect(screen.contains("points pending") && screen.contains("written 0"))
        #expect(screen.contains("METHOD  ENDPOINT"))
    }

    @Test func theDemoNeverPrintsURLCredentials() async throws {
        let spool = temporaryDirectory("demo-credentials").appendingPathComponent("spool")
        let dead = try RefusingPort()
        let demo = try Child(
            "apihealth-demo",
            [],
            environment: [
                "INFLUX_URL": "http://user:secret@127.0.0.1:\(dead.port)", "INFLUX_ORG": "o", "INFLUX_BUCKET": "b",
                "APIHEALTH_SPOOL_DIR": spool.path,
            ]
        )
        // Stopped once it is making requests (it has said where it ships), however long it took to
        // start; its output is read at the end (a pipe is flushed only then). Stopping, it tries to send
        // what is pending, fails, and prints the failure: the "last error" line shows that it did.
        #expect(
            await waitUntil {
                let lines = (try? SpoolReader(directory: spool).segments().flatMap(\.lines)) ?? []
                return lines.contains { $0.starts(with: Array("apihealth_request,".utf8)) }
            }
        )
        demo.signal(SIGTERM)
        _ = await demo.wait()
        withExtendedLifetime(dead) {}
        #expect(demo.stdout.contains("last error"), "\(demo.stdout.suffix(800))")
        #expect(!demo.stdout.contains("secret") && !demo.stderr.contains("secret"))
        #expect(demo.stdout.contains("<redacted>@127.0.0.1:\(dead.port)"), "\(demo.stdout.prefix(500))")
    }
}
