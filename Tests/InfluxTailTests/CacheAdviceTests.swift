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

/// The simulated caches' fields of one point: per candidate lifetime of
/// ``PointSchema/IntervalField/cacheAgeBounds`` (1, 10, 60, 300, 3600 s) the hits, their waiting and the
/// stale responses, over `judged` responses judged.
func simulatedFields(
    judged: Double,
    hits: [Double],
    milliseconds: [Double],
    stale: [Double],
    privateOnly: Double = 0,
    coalescable: Double = 0,
    coalescableMilliseconds: Double = 0
) -> [String: Double] {
    typealias F = PointSchema.IntervalField
    var fields = [
        F.cacheJudged: judged, F.cachePrivateOnly: privateOnly, F.cacheCoalescable: coalescable,
        F.cacheCoalescableMilliseconds: coalescableMilliseconds,
    ]
    for (index, bound) in F.cacheAgeBounds.enumerated() {
        fields[F.cacheHits(lifetime: bound)] = hits[index]
        fields[F.cacheHitsMilliseconds(lifetime: bound)] = milliseconds[index]
        fields[F.cacheStale(lifetime: bound)] = stale[index]
    }
    return fields
}

/// Eight interval points over 2 minutes observed (the first at 10 s, the last at 120 s, plus one 10 s
/// interval), with known sums:
/// - GET /catalog (shop), two points: 100 requests, 100 judged; hits 0, 0, 10, 30, 60 at 1 s … 1 h, stale
///   only at 1 h (20): the longest lifetime within 1 % stale is 5 min, serving 30 % and saving 3,000 ms,
///   1,500 ms per minute; every response states a lifetime; 5 served locally.
/// - GET /users/{id} (accounts), a 2xx and a 3xx point: 200 requests, 20 judged, every one per-user (an
///   `Authorization` header): 60 s (stale 0; 5 min has 1 of 20, 5 %), serving 75 %, 750 ms, 375 ms per minute,
///   for the client's own cache only; 8 requests in flight beside a duplicate (400 ms); 160 no-store (80 %),
///   20 storable without a lifetime, 20 revalidated.
/// - GET /config (shop): 10 judged; 1 s (10 s already serves 1 of 10 changed), serving 30 %, 30 ms, 15 ms
///   per minute; 2 of 10 state a lifetime.
/// - GET /feed (shop): 10 judged; every lifetime that serves any also serves 10 % or more changed: too stale.
/// - POST /orders (checkout): 50 requests, every cache field 0: listed last, nothing served.
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
                .merging(
                    simulatedFields(
                        judged: 60,
                        hits: [0, 0, 6, 18, 36],
                        milliseconds: [0, 0, 600, 1_800, 4_800],
                        stale: [0, 0, 0, 0, 12]
                    )
                ) { $1 }
        ),
        cacheIntervalLine(
            "GET",
            "/users/{id}",
            module: "accounts",
            at: t + 60,
            count: 180,
            cache: [F.cacheStorable: 20, F.cacheNoStore: 160]
                .merging(
                    simulatedFields(
                        judged: 20,
                        hits: [2, 10, 15, 18, 19],
                        milliseconds: [100, 500, 750, 900, 950],
                        stale: [0, 0, 0, 1, 5],
                        privateOnly: 180,
                        coalescable: 8,
                        coalescableMilliseconds: 400
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
            cache: [F.cacheRevalidated: 20, F.cachePrivateOnly: 20]
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
                .merging(
                    simulatedFields(
                        judged: 40,
                        hits: [0, 0, 4, 12, 24],
                        milliseconds: [0, 0, 400, 1_200, 3_200],
                        stale: [0, 0, 0, 0, 8]
                    )
                ) { $1 }
        ),
        cacheIntervalLine(
            "GET",
            "/config",
            module: "shop",
            at: t + 120,
            count: 10,
            cache: [F.cacheStorable: 10, F.cacheWithLifetime: 2]
                .merging(
                    simulatedFields(
                        judged: 10,
                        hits: [3, 4, 5, 6, 6],
                        milliseconds: [30, 40, 50, 60, 60],
                        stale: [0, 1, 2, 3, 4]
                    )
                ) { $1 }
        ),
        cacheIntervalLine(
            "GET",
            "/feed",
            module: "shop",
            at: t + 120,
            count: 10,
            cache: [F.cacheStorable: 10]
                .merging(
                    simulatedFields(
                        judged: 10,
                        hits: [2, 3, 3, 3, 3],
                        milliseconds: [20, 30, 30, 30, 30],
                        stale: [1, 2, 3, 4, 5]
                    )
                ) { $1 }
        ),
    ]
}

/// `influx-tail --cache` at 200 columns on ``cacheAdviceFixture()``.
let cacheAdviceFixtureTable = """
    METHOD  ENDPOINT                    MODULE    JUDGED  HITS  STALE   SAVED  TTL           SAVED/MIN  HEADERS SAY
    GET     api.example.com/catalog     shop         100  30 %    0 %   3.0 s  5 min             1.5 s  max-age/Expires on 100 %; served locally 5
    GET     api.example.com/users/{id}  accounts      20  75 %    0 %  750 ms  60 s private     375 ms  no-store on 80 %; no lifetime stated; per-user on 100 %; revalidated (304) 20
    GET     api.example.com/config      shop          10  30 %    0 %   30 ms  1 s               15 ms  max-age/Expires on 20 %
    GET     api.example.com/feed        shop          10     -      -       -  too stale             -  no lifetime stated
    POST    api.example.com/orders      checkout       0     -      -       -  -                     -  -
    5 endpoints · 7 of 8 interval points with cache fields · 1 endpoint without cache fields not shown · observed 2.0 min (first to last point + one 10 s interval)
    JUDGED: responses a cache could keep, read to their end, not in flight beside a duplicate
    TTL: the longest max-age serving under 1 % changed bodies (private: per-user responses, the client's own cache only) · HITS/STALE: what a cache with that max-age would have served unchanged/changed
    SAVED: the waiting of its hits · SAVED/MIN: per minute observed

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

    @Test func rowsAreRankedBySavedWaitingWithTheLongestLifetimeUnderTheStaleThreshold() throws {
        let advice = aggregate(cacheAdviceFixture()).cacheAdvice
        let rows = advice.rows()
        #expect(
            rows.map(\.endpoint.path) == ["/catalog", "/users/{id}", "/config", "/feed", "/orders"],
            "/legacy has none"
        )
        #expect(rows.map(\.endpoint.module) == ["shop", "accounts", "shop", "shop", "checkout"])
        #expect(advice.observedNanoseconds == 120_000_000_000, "10 s to 120 s, plus one 10 s interval")
        #expect(rows.allSatisfy { $0.observedNanoseconds == 120_000_000_000 })

        let catalog = rows[0]
        #expect(catalog.figures.requests == 100)
        #expect(catalog.figures.judged == 100)
        #expect(catalog.figures.hits == [0, 0, 10, 30, 60])
        #expect(catalog.figures.stale == [0, 0, 0, 0, 20])
        #expect(catalog.lifetime == .seconds(300), "1 h serves 20 % changed")
        #expect(catalog.hitShare == 0.3)
        #expect(catalog.staleShare == 0)
        #expect(catalog.lifetimeSavedMilliseconds == 3_000)
        #expect(catalog.savedPerMinute == 1_500, "3,000 ms over 2 minutes")
        #expect(catalog.sharedCacheAllowed)
        #expect(CacheAdviceTable.headerNotes(catalog) == ["max-age/Expires on 100 %", "served locally 5"])

        let users = rows[1]
        #expect(users.figures.requests == 200, "both status classes")
        #expect(users.figures.judged == 20)
        #expect(users.lifetime == .seconds(60), "5 min serves 1 of 20 changed: 5 %")
        #expect(users.hitShare == 0.75)
        #expect(users.savedPerMinute == 375)
        #expect(!users.sharedCacheAllowed, "per-user responses")
        #expect(users.figures.coalescable == 8)
        #expect(
            CacheAdviceTable.headerNotes(users) == [
                "no-store on 80 %", "no lifetime stated", "per-user on 100 %", "revalidated (304) 20",
            ]
        )

        let config = rows[2]
        #expect(config.lifetime == .seconds(1), "10 s serves 1 of 10 changed")
        #expect(config.hitShare == 0.3)
        #expect(config.savedPerMinute == 15)
        #expect(CacheAdviceTable.headerNotes(config) == ["max-age/Expires on 20 %"])

        #expect(rows[3].lifetime == .tooStale)
        #expect(rows[3].hitShare == nil && rows[3].savedPerMinute == nil)

        let orders = rows[4]
        #expect(orders.figures.requests == 50)
        #expect(orders.lifetime == .nothingServed)
        #expect(orders.savedPerMinute == nil)
        #expect(CacheAdviceTable.headerNotes(orders).isEmpty)

        let counts = advice.counts
        #expect(counts.intervalPoints == 8)
        #expect(counts.pointsWithCacheFields == 7)
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
            #expect(lines[0].contains("HITS") && lines[0].contains("TTL"), "\(width):\n\(narrow)")
            #expect(narrow.contains("too stale") && narrow.contains("60 s private"), "\(width):\n\(narrow)")
        }
        let eighty = CacheAdviceTable(width: 80, colors: false).render(advice.rows(), counts: advice.counts)
        #expect(
            eighty.hasPrefix("METHOD  ENDPOINT                    HITS  TTL           SAVED/MIN\n"),
            "module, SAVED, JUDGED, STALE and the headers left out first, the endpoint whole:\n\(eighty)"
        )

        // Only the first row shown (-n 1): the footer still counts every endpoint.
        let first = CacheAdviceTable(width: 200, colors: false).render(
            Array(advice.rows().prefix(1)),
            counts: advice.counts,
            allRows: advice.rows()
        )
        #expect(first.contains("5 endpoints · "), "\(first)")
        #expect(first.split(separator: "\n").filter { $0.hasPrefix("GET ") }.count == 1, "\(first)")
    }

    @Test func theLifetimeIsTheLongestWhoseStaleShareStaysUnderTheThreshold() throws {
        func lifetime(_ hits: [Double], stale: [Double], judged: Double = 1_000) -> CacheAdviceRow.Lifetime? {
            let line = cacheIntervalLine(
                "GET",
                "/a",
                module: "m",
                at: 1_700_000_000,
                count: Int(judged),
                cache: simulatedFields(judged: judged, hits: hits, milliseconds: [1, 2, 3, 4, 5], stale: stale)
            )
            return aggregate([line]).cacheAdvice.rows().first?.lifetime
        }
        #expect(lifetime([5, 5, 5, 5, 5], stale: [0, 0, 0, 0, 0]) == .seconds(3_600))
        #expect(lifetime([5, 6, 7, 8, 9], stale: [0, 0, 9, 11, 20]) == .seconds(60), "9 of 1,000: under 1 %")
        #expect(lifetime([5, 6, 7, 8, 9], stale: [0, 0, 10, 11, 20]) == .seconds(10), "10 of 1,000 is not under 1 %")
        #expect(lifetime([0, 0, 0, 0, 3], stale: [0, 0, 0, 0, 0]) == .seconds(3_600))
        #expect(lifetime([4, 4, 4, 4, 4], stale: [20, 20, 20, 20, 20]) == .tooStale)
        #expect(lifetime([0, 0, 0, 0, 0], stale: [0, 0, 0, 0, 0]) == .nothingServed)
        #expect(lifetime([0, 0, 0, 5, 0], stale: [0, 0, 0, 0, 0]) == .seconds(300), "no hit at 1 h: not advised")
        #expect(
            CacheAdviceTable.advice(try #require(aggregate(cacheAdviceFixture()).cacheAdvice.rows().last))
                == "no max-age up to 1 h would have served any of 0 responses judged"
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
                cache: simulatedFields(
                    judged: 10,
                    hits: [5, 5, 5, 5, 5],
                    milliseconds: [50, 50, 50, 50, 50],
                    stale: [0, 0, 0, 0, 0]
                )
            ),
        ]
        let advice = aggregate(lines).cacheAdvice
        let row = try #require(advice.rows().first)
        #expect(row.figures.requests == 10, "the requests of the points with cache fields")
        #expect(row.hitShare == 0.5)
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
        #expect(accounts.counts.pointsFilteredOut == 5)

        let none = aggregate(cacheAdviceFixture(), tags: [(key: "module", value: "nope")]).cacheAdvice
        #expect(
            CacheAdviceTable(width: 120, colors: false).render(none.rows(), counts: none.counts)
                == "no cache advice matches the filters (7 interval points with cache fields left out)\n"
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
        let section = CacheAdviceTable(width: 400, colors: false).section(rows)
        #expect(
            section == """
                What to cache (most waiting saved first; influx-tail --cache for all)
                GET api.example.com/catalog: a 5 min max-age would have served 30 % (0 % changed) of 100 responses judged, saving 1.5 s of waiting per minute; headers: max-age/Expires on 100 %, served locally 5
                GET api.example.com/users/{id}: a 60 s max-age would have served 75 % (0 % changed) of 20 responses judged, saving 375 ms of waiting per minute; in the client's own cache only (Cache-Control: private): some responses are one user's; 8 requested while the same was in flight (coalescing would save 400 ms); headers: no-store on 80 %, no lifetime stated, per-user on 100 %, revalidated (304) 20
                GET api.example.com/config: a 1 s max-age would have served 30 % (0 % changed) of 10 responses judged, saving 15 ms of waiting per minute; headers: max-age/Expires on 20 %
                … and 1 more

                """,
            "\(section)"
        )
        let two = CacheAdviceTable(width: 80, colors: false).section(rows, limit: 2)
        let lines = two.split(separator: "\n")
        #expect(lines.count == 4, "title, two endpoints, the rest counted: \(two)")
        #expect(lines.allSatisfy { $0.count <= 80 }, "\(two)")
        #expect(lines.last == "… and 2 more")

        let quiet = aggregate([
            cacheIntervalLine("POST", "/orders", module: "c", at: 1_700_000_000, count: 50, cache: [:])
        ])
        #expect(
            CacheAdviceTable(width: 120, colors: false).section(quiet.cacheAdvice.rows())
                == "What to cache: no cache would have served any of 0 responses judged\n"
        )
    }

    @Test func jsonRowsCarryTheSumsAndWhatTheySuggest() throws {
        let rows = aggregate(cacheAdviceFixture()).cacheAdvice.rows()
        let objects = try CacheAdviceTable.json(rows).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["path"] as? String } == ["/catalog", "/users/{id}", "/config", "/feed", "/orders"])
        let users = objects[1]
        #expect(users["host"] as? String == "api.example.com")
        #expect(users["method"] as? String == "GET")
        #expect(users["module"] as? String == "accounts")
        #expect(users["requests"] as? Int == 200)
        #expect(users["judged"] as? Int == 20)
        #expect(users["hits_le_10"] as? Int == 10)
        #expect(users["hits_le_60"] as? Int == 15)
        #expect((users["hits_ms_le_60"] as? NSNumber)?.doubleValue == 750)
        #expect(users["stale_le_300"] as? Int == 1)
        #expect(users["ttl_seconds"] as? Int == 60)
        #expect(users["ttl"] as? String == "60 s private")
        #expect(users["shared_cache"] as? Bool == false)
        #expect((users["hit_share"] as? NSNumber)?.doubleValue == 0.75)
        #expect((users["stale_share"] as? NSNumber)?.doubleValue == 0)
        #expect((users["ttl_saved_ms"] as? NSNumber)?.doubleValue == 750)
        #expect((users["ttl_saved_ms_per_minute"] as? NSNumber)?.doubleValue == 375)
        #expect((users["observed_seconds"] as? NSNumber)?.doubleValue == 120)
        #expect(users["private_only"] as? Int == 200)
        #expect(users["coalescable"] as? Int == 8)
        #expect((users["coalescable_ms"] as? NSNumber)?.doubleValue == 400)
        #expect(users["no_store"] as? Int == 160)
        #expect(users["storable"] as? Int == 20)
        #expect(users["revalidated"] as? Int == 20)
        #expect(
            users["headers"] as? [String] == [
                "no-store on 80 %", "no lifetime stated", "per-user on 100 %", "revalidated (304) 20",
            ]
        )

        let catalog = objects[0]
        #expect(catalog["ttl_seconds"] as? Int == 300)
        #expect(catalog["shared_cache"] as? Bool == true)
        #expect(catalog["served_locally"] as? Int == 5)
        #expect(objects[3]["ttl"] as? String == "too stale")
        #expect(objects[3]["ttl_seconds"] is NSNull)
        #expect(objects[3]["hit_share"] is NSNull)
        #expect(objects[4]["ttl"] is NSNull, "nothing served")
        #expect(objects[4]["headers"] as? [String] == [])
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
        #expect(lines.filter { $0.hasPrefix("GET ") }.count == 1, "\(first.stdout)")
        #expect(lines[1].hasPrefix("GET     api.example.com/catalog "), "\(first.stdout)")

        let shop = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--cache", "--where", "module=shop", "--width", "200"]
        )
        #expect(shop.stdout.split(separator: "\n").filter { $0.hasPrefix("GET ") }.count == 3, "\(shop.stdout)")
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
        #expect((objects[1]["ttl_saved_ms_per_minute"] as? NSNumber)?.doubleValue == 375)
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
                "GET api.example.com/catalog: a 5", "GET api.example.com/users/{id}: ",
                "GET api.example.com/config: a 1 ", "… and 1 more", "",
            ]
        )
        #expect(lines[title + 2].hasSuffix("…"), "cut to the width: \(run.stdout)")

        let json = try await summaryRows(["--spool", spool.path])
        #expect(json.rows.count == 6, "JSON rows are the summary's only")
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
