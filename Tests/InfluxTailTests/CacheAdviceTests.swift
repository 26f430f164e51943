import APIHealth
import APIHealthSummary
import Foundation
import LineProtocol
import TestSupport
import Testing

/// An interval line of `api.example.com` as the agent writes it with cache advice on: `count`, `errors`,
/// `le_inf`, then every field of ``PointSchema/cacheIntervalFields`` (0 unless `cache` gives it), or none of
/// them when `cache` is `nil` (the advisor off).
func cacheIntervalLine(
    _ method: String,
    _ path: String,
    module: String,
    statusClass: String = "2xx",
    at seconds: Int64,
    count: Int,
    cache: [String: Double]?
) -> String {
    var fields = ["count=\(count)i", "errors=0i", "le_inf=\(count)i"]
    if let cache {
        for name in PointSchema.cacheIntervalFields {
            let value = cache[name] ?? 0
            fields.append(name.contains("_ms") ? "\(name)=\(value)" : "\(name)=\(Int(value))i")
        }
    }
    return
        "apihealth_request_interval,host=api.example.com,instance=i-1,method=\(method),module=\(module),path=\(path),service=shop,status_class=\(statusClass) \(fields.joined(separator: ",")) \(seconds)000000000"
}

/// The repeated fields of one point: `within` and `millisecondsWithin` per bound of
/// ``PointSchema/IntervalField/cacheAgeBounds`` (1, 10, 60, 300, 3600 s).
func repeatedFields(
    _ within: [Double],
    _ millisecondsWithin: [Double],
    total: Double,
    milliseconds: Double
) -> [String: Double] {
    typealias F = PointSchema.IntervalField
    var fields = [F.cacheRepeated: total, F.cacheRepeatedMilliseconds: milliseconds]
    for (index, bound) in F.cacheAgeBounds.enumerated() {
        fields[F.cacheRepeated(withinSeconds: bound)] = within[index]
        fields[F.cacheRepeatedMilliseconds(withinSeconds: bound)] = millisecondsWithin[index]
    }
    return fields
}

/// Seven interval points over 2 minutes observed (the first at 10 s, the last at 120 s, plus one 10 s
/// interval), with known sums:
/// - GET /catalog (shop), two points: 100 requests, 90 repeated (90 %), 12,000 ms of their waiting, but
///   only 30 within 1 h: most came later (none under 1 h); every response states a lifetime; 5 served
///   locally.
/// - GET /users/{id} (accounts), a 2xx and a 3xx point: 200 requests, 144 repeated (72 %) taking 7,200 ms;
///   60 within 10 s (< 72, half), 130 within 60 s: a 60 s max-age, catching 65 % of requests and saving
///   3,800 ms, 1,900 ms per minute; 160 no-store (80 %), 20 storable without a lifetime, 20 revalidated.
/// - GET /config (shop): 10 requests, 6 repeated taking 60.5 ms, 3 within 1 s (exactly half): a 1 s
///   max-age, catching 30 % and saving 30 ms, 15 ms per minute; 2 of 10 state a lifetime.
/// - POST /orders (checkout): 50 requests, every cache field 0: listed last, nothing repeated.
/// - GET /legacy (old): no cache fields (the advisor off): not listed.
func cacheAdviceFixture() -> [String] {
    typealias F = PointSchema.IntervalField
    let t: Int64 = 1_700_000_000
    return [
        cacheIntervalLine(
            "GET",
            "/catalog",
            module: "shop",
            at: t + 10,
            count: 60,
            cache: [F.cacheStorable: 60, F.cacheWithLifetime: 60, F.cacheServedLocally: 5]
                .merging(repeatedFields([0, 0, 0, 6, 18], [0, 0, 0, 800, 2_400], total: 54, milliseconds: 7_200)) {
                    $1
                }
        ),
        cacheIntervalLine(
            "GET",
            "/users/{id}",
            module: "accounts",
            at: t + 60,
            count: 180,
            cache: [F.cacheStorable: 20, F.cacheNoStore: 160]
                .merging(
                    repeatedFields(
                        [20, 60, 130, 140, 144],
                        [1_000, 3_000, 3_800, 7_000, 7_200],
                        total: 144,
                        milliseconds: 7_200
                    )
                ) { $1 }
        ),
        cacheIntervalLine(
            "GET",
            "/users/{id}",
            module: "accounts",
            statusClass: "3xx",
            at: t + 60,
            count: 20,
            cache: [F.cacheRevalidated: 20]
        ),
        cacheIntervalLine("POST", "/orders", module: "checkout", at: t + 90, count: 50, cache: [:]),
        cacheIntervalLine("GET", "/legacy", module: "old", at: t + 90, count: 10, cache: nil),
        cacheIntervalLine(
            "GET",
            "/catalog",
            module: "shop",
            at: t + 120,
            count: 40,
            cache: [F.cacheStorable: 40, F.cacheWithLifetime: 40]
                .merging(repeatedFields([0, 0, 0, 4, 12], [0, 0, 0, 500, 1_600], total: 36, milliseconds: 4_800)) {
                    $1
                }
        ),
        cacheIntervalLine(
            "GET",
            "/config",
            module: "shop",
            at: t + 120,
            count: 10,
            cache: [F.cacheStorable: 10, F.cacheWithLifetime: 2]
                .merging(repeatedFields([3, 4, 5, 6, 6], [30, 40, 50, 60, 60], total: 6, milliseconds: 60.5)) { $1 }
        ),
    ]
}

/// `influx-tail --cache` at 200 columns on ``cacheAdviceFixture()``.
let cacheAdviceFixtureTable = """
    METHOD  ENDPOINT                    MODULE    REQS  REPEATED   SAVED  TTL             SAVED/MIN  HEADERS SAY
    GET     api.example.com/catalog     shop       100      90 %  12.0 s  none under 1 h          -  max-age/Expires on 100 %; served locally 5
    GET     api.example.com/users/{id}  accounts   200      72 %   7.2 s  60 s                1.9 s  no-store on 80 %; no lifetime stated; revalidated (304) 20
    GET     api.example.com/config      shop        10      60 %   60 ms  1 s                 15 ms  max-age/Expires on 20 %
    POST    api.example.com/orders      checkout    50       0 %    0 ms  -                       -  -
    4 endpoints · 6 of 7 interval points with cache fields · 1 endpoint without cache fields not shown · observed 2.0 min (first to last point + one 10 s interval)
    REPEATED: same body as the URL's previous response · SAVED: the waiting they took · TTL: the shortest max-age serving at least half of them · SAVED/MIN: what it would have saved per minute observed

    """

/// Writes `lines` as one segment of a new spool.
func writeCacheSpool(_ lines: [String], prefix: String = "cache") throws -> URL {
    let spool = temporaryDirectory(prefix)
    try markAsSpool(spool)
    try Data((lines.joined(separator: "\n") + "\n").utf8)
        .write(to: spool.appendingPathComponent("00000000000000000001.lp"))
    return spool
}

@Suite struct CacheAdviceTests {
    func aggregate(_ lines: [String], tags: [(key: String, value: String)] = []) -> SummaryAggregator {
        var summary = SummaryAggregator(tags: tags)
        for line in lines { summary.add(Array(line.utf8)) }
        return summary
    }

    @Test func rowsAreRankedBySavedWaitingWithSharesLifetimesAndSavingsPerMinute() throws {
        let advice = aggregate(cacheAdviceFixture()).cacheAdvice
        let rows = advice.rows()
        #expect(rows.map(\.endpoint.path) == ["/catalog", "/users/{id}", "/config", "/orders"], "/legacy has none")
        #expect(rows.map(\.endpoint.module) == ["shop", "accounts", "shop", "checkout"])
        #expect(advice.observedNanoseconds == 120_000_000_000, "10 s to 120 s, plus one 10 s interval")
        #expect(rows.allSatisfy { $0.observedNanoseconds == 120_000_000_000 })

        let catalog = rows[0]
        #expect(catalog.figures.requests == 100)
        #expect(catalog.figures.repeated == 90)
        #expect(catalog.repeatedShare == 0.9)
        #expect(catalog.figures.repeatedMilliseconds == 12_000)
        #expect(catalog.figures.repeatedWithin == [0, 0, 0, 10, 30])
        #expect(catalog.lifetime == .beyondLongestBound, "30 within 1 h is less than half of 90")
        #expect(catalog.savedPerMinute == nil)
        #expect(CacheAdviceTable.headerNotes(catalog) == ["max-age/Expires on 100 %", "served locally 5"])

        let users = rows[1]
        #expect(users.figures.requests == 200, "both status classes")
        #expect(users.figures.repeated == 144)
        #expect(users.repeatedShare == 0.72)
        #expect(users.lifetime == .seconds(60), "60 within 10 s < 72 ≤ 130 within 60 s")
        #expect(users.caughtShare == 0.65)
        #expect(users.lifetimeSavedMilliseconds == 3_800)
        #expect(users.savedPerMinute == 1_900, "3,800 ms over 2 minutes")
        #expect(
            CacheAdviceTable.headerNotes(users) == ["no-store on 80 %", "no lifetime stated", "revalidated (304) 20"]
        )

        let config = rows[2]
        #expect(config.lifetime == .seconds(1), "3 within 1 s is exactly half of 6")
        #expect(config.caughtShare == 0.3)
        #expect(config.savedPerMinute == 15)
        #expect(config.figures.repeatedMilliseconds == 60.5)
        #expect(CacheAdviceTable.headerNotes(config) == ["max-age/Expires on 20 %"])

        let orders = rows[3]
        #expect(orders.figures.requests == 50)
        #expect(orders.lifetime == .nothingRepeated)
        #expect(orders.savedPerMinute == nil)
        #expect(CacheAdviceTable.headerNotes(orders).isEmpty)

        let counts = advice.counts
        #expect(counts.intervalPoints == 7)
        #expect(counts.pointsWithCacheFields == 6)
        #expect(counts.endpointsWithoutCacheFields == 1)
    }

    @Test func theTableSaysEveryFigureAndFitsAnyWidth() {
        let advice = aggregate(cacheAdviceFixture()).cacheAdvice
        let table = CacheAdviceTable(width: 200, colors: false).render(advice.rows(), counts: advice.counts)
        #expect(table == cacheAdviceFixtureTable, "\(table)")

        for width in [32, 40, 60, 80, 100, 120, 160] {
            let narrow = CacheAdviceTable(width: width, colors: false).render(advice.rows(), counts: advice.counts)
            let lines = narrow.split(separator: "\n")
            #expect(lines.allSatisfy { $0.count <= width }, "\(width):\n\(narrow)")
            #expect(lines[0].contains("REPEATED") && lines[0].contains("TTL"), "\(width):\n\(narrow)")
            #expect(narrow.contains("none under 1 h") && narrow.contains("60 s"), "\(width):\n\(narrow)")
        }
        let eighty = CacheAdviceTable(width: 80, colors: false).render(advice.rows(), counts: advice.counts)
        #expect(
            eighty.hasPrefix("METHOD  ENDPOINT                    REPEATED  TTL             SAVED/MIN\n"),
            "module, SAVED, REQS and the headers left out first, the endpoint whole:\n\(eighty)"
        )

        // Only the first row shown (-n 1): the footer still counts every endpoint.
        let first = CacheAdviceTable(width: 200, colors: false).render(
            Array(advice.rows().prefix(1)),
            counts: advice.counts,
            allRows: advice.rows()
        )
        #expect(first.split(separator: "\n").count == 4, "\(first)")
        #expect(first.contains("4 endpoints · "), "\(first)")
    }

    @Test func theLifetimeIsTheShortestBoundCatchingHalfTheRepeatedResponses() throws {
        typealias F = PointSchema.IntervalField
        func lifetime(_ within: [Double], repeated: Double) -> CacheAdviceRow.Lifetime? {
            let line = cacheIntervalLine(
                "GET",
                "/a",
                module: "m",
                at: 1_700_000_000,
                count: 100,
                cache: repeatedFields(within, [1, 2, 3, 4, 5], total: repeated, milliseconds: 6)
            )
            return aggregate([line]).cacheAdvice.rows().first?.lifetime
        }
        #expect(lifetime([5, 5, 5, 5, 5], repeated: 10) == .seconds(1))
        #expect(lifetime([4, 5, 5, 5, 5], repeated: 10) == .seconds(10))
        #expect(lifetime([0, 0, 4, 9, 9], repeated: 9) == .seconds(300), "4 of 9 is under half")
        #expect(lifetime([0, 0, 0, 0, 1], repeated: 1) == .seconds(3_600))
        #expect(lifetime([0, 0, 0, 0, 4], repeated: 9) == .beyondLongestBound)
        #expect(lifetime([0, 0, 0, 0, 0], repeated: 0) == .nothingRepeated)
        #expect(
            CacheAdviceTable.advice(try #require(aggregate(cacheAdviceFixture()).cacheAdvice.rows().last))
                == "nothing repeated"
        )
    }

    @Test func pointsWithoutCacheFieldsCountNeitherInRequestsNorInTheTimeObserved() throws {
        let lines = [
            cacheIntervalLine("GET", "/a", module: "m", at: 1_700_000_000, count: 1_000, cache: nil),
            cacheIntervalLine(
                "GET",
                "/a",
                module: "m",
                at: 1_700_000_300,
                count: 10,
                cache: repeatedFields([5, 5, 5, 5, 5], [50, 50, 50, 50, 50], total: 5, milliseconds: 50)
            ),
        ]
        let advice = aggregate(lines).cacheAdvice
        let row = try #require(advice.rows().first)
        #expect(row.figures.requests == 10, "the requests the advisor judged")
        #expect(row.repeatedShare == 0.5)
        #expect(advice.observedNanoseconds == 10_000_000_000, "one point: one interval")
        #expect(row.savedPerMinute == 300, "50 ms in 10 s")
        #expect(advice.counts.endpointsWithoutCacheFields == 0, "the endpoint has cache fields in one point")
    }

    @Test func aFilterPicksRowsWithoutChangingTheirFigures() throws {
        let all = aggregate(cacheAdviceFixture()).cacheAdvice
        let accounts = aggregate(cacheAdviceFixture(), tags: [(key: "module", value: "accounts")]).cacheAdvice
        #expect(accounts.rows().map(\.endpoint.path) == ["/users/{id}"])
        #expect(accounts.rows().first == all.rows().first { $0.endpoint.path == "/users/{id}" })
        #expect(accounts.observedNanoseconds == 120_000_000_000, "the points left out still count in the time")
        #expect(accounts.counts.pointsFilteredOut == 4)

        let none = aggregate(cacheAdviceFixture(), tags: [(key: "module", value: "nope")]).cacheAdvice
        #expect(
            CacheAdviceTable(width: 120, colors: false).render(none.rows(), counts: none.counts)
                == "no cache advice matches the filters (6 interval points with cache fields left out)\n"
        )
    }

    @Test func withoutCacheFieldsOneLineSaysTheAdviceIsOffAndHowToTurnItOn() {
        let off = aggregate([
            cacheIntervalLine("GET", "/legacy", module: "old", at: 1_700_000_000, count: 10, cache: nil)
        ])
        let table = CacheAdviceTable(width: 120, colors: false)
        #expect(
            table.render(off.cacheAdvice.rows(), counts: off.cacheAdvice.counts)
                == "cache advice is off: no interval point has cache_* fields (set APIHEALTH_CACHE_ADVICE=1 or capture.cacheAdvice = true)\n"
        )
        #expect(table.section(off.cacheAdvice.rows()).isEmpty, "no What to cache section")
        let empty = SummaryAggregator().cacheAdvice
        #expect(
            table.render(empty.rows(), counts: empty.counts)
                == "cache advice is off: no interval points read (set APIHEALTH_CACHE_ADVICE=1 or capture.cacheAdvice = true)\n"
        )
    }

    @Test func theWhatToCacheSectionAdvisesTheEndpointsThatWouldHaveSavedMost() {
        let rows = aggregate(cacheAdviceFixture()).cacheAdvice.rows()
        let section = CacheAdviceTable(width: 300, colors: false).section(rows)
        #expect(
            section == """
                What to cache (most waiting saved first; influx-tail --cache for all)
                GET api.example.com/catalog: 90 % repeated, most over 1 h apart (none under 1 h catches most); headers: max-age/Expires on 100 %, served locally 5
                GET api.example.com/users/{id}: 65 % repeated within 60 s; a 60 s max-age would have saved 1.9 s of waiting per minute; headers: no-store on 80 %, no lifetime stated, revalidated (304) 20
                GET api.example.com/config: 30 % repeated within 1 s; a 1 s max-age would have saved 15 ms of waiting per minute; headers: max-age/Expires on 20 %

                """,
            "\(section)"
        )
        let two = CacheAdviceTable(width: 80, colors: false).section(rows, limit: 2)
        let lines = two.split(separator: "\n")
        #expect(lines.count == 4, "title, two endpoints, the rest counted: \(two)")
        #expect(lines.allSatisfy { $0.count <= 80 }, "\(two)")
        #expect(lines.last == "… and 1 more")

        let quiet = aggregate([
            cacheIntervalLine("POST", "/orders", module: "c", at: 1_700_000_000, count: 50, cache: [:])
        ])
        #expect(
            CacheAdviceTable(width: 120, colors: false).section(quiet.cacheAdvice.rows())
                == "What to cache: nothing repeated in 50 requests\n"
        )
    }

    @Test func jsonRowsCarryTheSumsAndWhatTheySuggest() throws {
        let rows = aggregate(cacheAdviceFixture()).cacheAdvice.rows()
        let objects = try CacheAdviceTable.json(rows).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["path"] as? String } == ["/catalog", "/users/{id}", "/config", "/orders"])
        let users = objects[1]
        #expect(users["host"] as? String == "api.example.com")
        #expect(users["method"] as? String == "GET")
        #expect(users["module"] as? String == "accounts")
        #expect(users["requests"] as? Int == 200)
        #expect(users["repeated"] as? Int == 144)
        #expect((users["repeated_share"] as? NSNumber)?.doubleValue == 0.72)
        #expect((users["saved_ms"] as? NSNumber)?.doubleValue == 7_200)
        #expect(users["repeated_le_10"] as? Int == 60)
        #expect(users["repeated_le_60"] as? Int == 130)
        #expect((users["repeated_ms_le_60"] as? NSNumber)?.doubleValue == 3_800)
        #expect(users["ttl_seconds"] as? Int == 60)
        #expect(users["ttl"] as? String == "60 s")
        #expect((users["ttl_saved_ms"] as? NSNumber)?.doubleValue == 3_800)
        #expect((users["ttl_saved_ms_per_minute"] as? NSNumber)?.doubleValue == 1_900)
        #expect((users["observed_seconds"] as? NSNumber)?.doubleValue == 120)
        #expect(users["no_store"] as? Int == 160)
        #expect(users["storable"] as? Int == 20)
        #expect(users["revalidated"] as? Int == 20)
        #expect(users["headers"] as? [String] == ["no-store on 80 %", "no lifetime stated", "revalidated (304) 20"])

        let catalog = objects[0]
        #expect(catalog["ttl_seconds"] is NSNull)
        #expect(catalog["ttl"] as? String == "none under 1 h")
        #expect(catalog["ttl_saved_ms_per_minute"] is NSNull)
        #expect(catalog["served_locally"] as? Int == 5)
        #expect((objects[2]["saved_ms"] as? NSNumber)?.doubleValue == 60.5)
        #expect(objects[3]["ttl"] is NSNull, "nothing repeated")
        #expect(objects[3]["headers"] as? [String] == [])
    }

    @Test func sharesAndDurationsReadAsPeopleSayThem() {
        #expect(CacheAdviceTable.percent(0) == "0 %")
        #expect(CacheAdviceTable.percent(0.004) == "<1 %")
        #expect(CacheAdviceTable.percent(0.725) == "73 %")
        #expect(CacheAdviceTable.percent(0.996) == ">99 %")
        #expect(CacheAdviceTable.percent(1) == "100 %")
        #expect(CacheAdviceTable.duration(0.4) == "0.4 ms")
        #expect(CacheAdviceTable.duration(850) == "850 ms")
        #expect(CacheAdviceTable.duration(1_900) == "1.9 s")
        #expect(CacheAdviceTable.duration(150_000) == "2.5 min")
        #expect(CacheAdviceTable.duration(4_320_000) == "1.2 h")
        #expect(CacheAdviceTable.seconds(60) == "60 s")
        #expect(CacheAdviceTable.seconds(300) == "5 min")
        #expect(CacheAdviceTable.seconds(3_600) == "1 h")
    }

    // MARK: - Through the executable

    @Test func influxTailCachePrintsTheTable() async throws {
        let spool = try writeCacheSpool(cacheAdviceFixture())
        let run = try await Child.run("influx-tail", ["--spool", spool.path, "--cache", "--width", "200"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == cacheAdviceFixtureTable, "\(run.stdout)")

        let columns = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--cache"],
            environment: ["COLUMNS": "200"]
        )
        #expect(columns.stdout == cacheAdviceFixtureTable, "$COLUMNS off a terminal")

        let first = try await Child.run("influx-tail", ["--spool", spool.path, "--cache", "-n", "1", "--width", "200"])
        let lines = first.stdout.split(separator: "\n")
        #expect(lines.count == 4, "\(first.stdout)")
        #expect(lines[1].hasPrefix("GET     api.example.com/catalog "), "\(first.stdout)")

        let shop = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--cache", "--where", "module=shop", "--width", "200"]
        )
        #expect(shop.stdout.split(separator: "\n").filter { $0.hasPrefix("GET ") }.count == 2, "\(shop.stdout)")
        #expect(shop.stdout.contains("  15 ms  "), "the same saving per minute as unfiltered: \(shop.stdout)")
    }

    @Test func influxTailCacheJSONAndTheAdviceOffLine() async throws {
        let spool = try writeCacheSpool(cacheAdviceFixture())
        let json = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--cache", "--format", "json", "-n", "2"]
        )
        #expect(json.status == 0, "\(json.stderr)")
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["path"] as? String } == ["/catalog", "/users/{id}"])
        #expect((objects[1]["ttl_saved_ms_per_minute"] as? NSNumber)?.doubleValue == 1_900)
        #expect(json.stderr.isEmpty, "\(json.stderr)")

        let offSpool = try writeCacheSpool([
            cacheIntervalLine("GET", "/legacy", module: "old", at: 1_700_000_000, count: 10, cache: nil)
        ])
        let off = try await Child.run("influx-tail", ["--spool", offSpool.path, "--cache"])
        #expect(off.status == 0, "\(off.stderr)")
        #expect(
            off.stdout
                == "cache advice is off: no interval point has cache_* fields (set APIHEALTH_CACHE_ADVICE=1 or capture.cacheAdvice = true)\n"
        )
        let offJSON = try await Child.run("influx-tail", ["--spool", offSpool.path, "--cache", "--format", "json"])
        #expect(offJSON.status == 0)
        #expect(offJSON.stdout.isEmpty)
        #expect(offJSON.stderr.contains("influx-tail: cache advice is off"), "\(offJSON.stderr)")

        let summary = try await Child.run("influx-tail", ["--spool", offSpool.path, "--summary", "--width", "200"])
        #expect(
            !summary.stdout.contains("What to cache") && !summary.stdout.contains("cache advice"),
            "\(summary.stdout)"
        )
    }

    @Test func influxTailSummaryEndsWithWhatToCache() async throws {
        let spool = try writeCacheSpool(cacheAdviceFixture())
        let run = try await Child.run("influx-tail", ["--spool", spool.path, "--summary", "--width", "200"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let title = try #require(lines.firstIndex { $0.hasPrefix("What to cache") }, "\(run.stdout)")
        #expect(lines[title - 1].isEmpty, "after a blank line")
        #expect(lines[title - 2].contains("skipped: "), "after the summary's footer")
        #expect(
            lines[(title + 1)...].map { $0.prefix(32) } == [
                "GET api.example.com/catalog: 90 ", "GET api.example.com/users/{id}: ",
                "GET api.example.com/config: 30 %",
                "",
            ]
        )
        #expect(lines[title + 2].hasSuffix("revalidated (304) 20"), "\(run.stdout)")

        let json = try await summaryRows(["--spool", spool.path])
        #expect(json.rows.count == 5, "JSON rows are the summary's only")
    }

    @Test func cacheRefusesOptionsItCannotHonour() async throws {
        let both = try await Child.run("influx-tail", ["--spool", "/tmp", "--cache", "--summary"])
        #expect(both.status == 2)
        #expect(both.stderr.contains("--cache cannot be combined with --summary"), "\(both.stderr)")
        let sorted = try await Child.run("influx-tail", ["--spool", "/tmp", "--cache", "--sort", "p99"])
        #expect(sorted.status == 2)
        #expect(sorted.stderr.contains("--cache ranks by the waiting"), "\(sorted.stderr)")
        let help = try await Child.run("influx-tail", ["--help"])
        #expect(help.stdout.contains("--cache"))
    }
}
