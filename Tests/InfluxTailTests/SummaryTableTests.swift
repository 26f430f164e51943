import APIHealthSummary
import Foundation
import LineProtocol
import Testing

/// The table's country column, its one request total, its budget cells and how it shortens an endpoint,
/// from lines and rows whose figures are known.
@Suite struct SummaryTableTests {
    func request(_ path: String, country: String?, status: Int = 200, at seconds: Int64 = 1_700_000_000) -> [UInt8] {
        let tag = country.map { ",country=\($0)" } ?? ""
        return Array(
            "apihealth_request\(tag),host=api.example.com,method=GET,path=\(path),status=\(status) duration_ms=5,errors=\(status >= 400 ? 1 : 0)i \(seconds)000000000"
                .utf8
        )
    }

    func intervalPoint(_ path: String, country: String?, count: Int, errors: Int) throws -> Point {
        let tag = country.map { ",country=\($0)" } ?? ""
        let line =
            "apihealth_request_interval\(tag),host=127.0.0.1:38211,method=POST,path=\(path) count=\(count)i,errors=\(errors)i,le_10=\(count)i,le_inf=\(count)i,objective_availability=0.999 1700000010000000000"
        return try #require(try LineParser().parseLine(Array(line.utf8)))
    }

    func cells(_ table: String, startingWith prefix: String) -> [String]? {
        table.split(separator: "\n").first { $0.hasPrefix(prefix) }.map {
            $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
    }

    @Test func linesWithACountryTagAreRowsPerEndpointAndCountryWithACountryColumn() {
        var summary = SummaryAggregator()
        for _ in 0..<3 { summary.add(request("/orders", country: "BR", status: 503)) }
        for _ in 0..<2 { summary.add(request("/orders", country: "DE")) }
        summary.add(request("/orders", country: nil))
        let rows = SummaryOrder.worst.sorted(summary.rows())
        #expect(rows.map(\.country) == ["BR", "DE", nil], "worst first, then by country")
        #expect(rows.map(\.requests) == [3, 2, 1])
        let table = SummaryTable(width: 120, colors: false).render(rows, counts: summary.counts)
        let header = table.prefix { $0 != "\n" }
        #expect(header.hasPrefix("METHOD  ENDPOINT                COUNTRY  REQS  ERRS"), "\(table)")
        #expect(cells(table, startingWith: "GET")?.prefix(5) == ["GET", "api.example.com/orders", "BR", "3", "3"])
        #expect(table.contains("GET     api.example.com/orders  -           1     0"), "no tag: -\n\(table)")
        #expect(
            SummaryTable.json(rows, slotWidth: nil).split(separator: "\n").first?.contains(#""country":"BR""#) == true
        )

        var untagged = SummaryAggregator()
        untagged.add(request("/orders", country: nil))
        let plain = SummaryTable(width: 120, colors: false).render(untagged.rows(), counts: untagged.counts)
        #expect(!plain.contains("COUNTRY"), "\(plain)")
        #expect(!SummaryTable.json(untagged.rows(), slotWidth: nil).contains("country"))
    }

    /// GraphQL operations are endpoints: `influx-tail --summary` lists each one as a row of its own, the
    /// operation's name (or what stands for it) read whole in the endpoint column.
    @Test func graphQLOperationsAreEndpointRowsOfTheirOwn() {
        var summary = SummaryAggregator()
        for _ in 0..<3 { summary.add(request("/graphql/GetUser", country: nil)) }
        for _ in 0..<2 { summary.add(request("/graphql/{anonymous}", country: nil, status: 500)) }
        summary.add(request("/graphql/{sha256:ecf4edb4}", country: nil))
        let rows = SummaryOrder.worst.sorted(summary.rows())
        #expect(rows.count == 3)
        let table = SummaryTable(width: 120, colors: false).render(rows, counts: summary.counts)
        func row(_ endpoint: String) -> [String]? {
            table.split(separator: "\n").first { $0.contains(endpoint + " ") }.map {
                $0.split(separator: " ", omittingEmptySubsequences: true).prefix(4).map(String.init)
            }
        }
        #expect(
            row("api.example.com/graphql/GetUser") == ["GET", "api.example.com/graphql/GetUser", "3", "0"],
            "\(table)"
        )
        #expect(row("api.example.com/graphql/{anonymous}") == ["GET", "api.example.com/graphql/{anonymous}", "2", "2"])
        #expect(
            row("api.example.com/graphql/{sha256:ecf4edb4}")?.prefix(3) == [
                "GET", "api.example.com/graphql/{sha256:ecf4edb4}", "1",
            ]
        )
    }

    /// The demo after an outage: 3,000 requests in its interval points, 2,949 raw lines still in the spool.
    /// The footer's total is the rows' total; the raw lines are said apart.
    @Test func theFooterTotalIsTheRowsTotalWhateverTheyWereReadFrom() throws {
        var summary = SummaryAggregator()
        summary.readsIntervalLines = false
        for index in 0..<2_949 {
            summary.add(request("/orders", country: index % 2 == 0 ? "BR" : "DE", at: 1_700_000_000 + Int64(index % 9)))
        }
        summary.add(intervalPoint: try intervalPoint("/checkout/orders", country: "BR", count: 1_000, errors: 1_000))
        summary.add(intervalPoint: try intervalPoint("/checkout/orders", country: "DE", count: 2_000, errors: 4))
        let rows = summary.rows()
        let total = rows.reduce(0) { $0 + $1.requests }
        let table = SummaryTable(width: 200, colors: false).render(rows, counts: summary.counts)
        #expect(table.contains(" · \(total) requests · "), "\(table)")
        #expect(table.contains("2949 raw request lines read"), "\(table)")
        #expect(total == 2_949 + 3_000)

        // Only the first rows shown (-n): the totals are still every row's.
        let first = Array(SummaryOrder.requests.sorted(rows).prefix(1))
        let limited = SummaryTable(width: 200, colors: false).render(first, counts: summary.counts, allRows: rows)
        #expect(limited.contains(" · \(total) requests · "), "\(limited)")

        // Read from raw points only, the total is the lines' and nothing is said apart.
        var raw = SummaryAggregator()
        for _ in 0..<7 { raw.add(request("/a", country: nil)) }
        let rawTable = SummaryTable(width: 200, colors: false).render(raw.rows(), counts: raw.counts)
        #expect(rawTable.contains(" · 7 requests · ") && !rawTable.contains("raw request lines"), "\(rawTable)")
    }

    /// A budget spent past the whole of it counts budgets: 1,000 failed of 1,000 at 99.9 % is 1,000 budgets
    /// (not "100000%"); 4 of 2,000 is 2 budgets (not "200%"); below the whole budget it is a percentage.
    @Test func theBudgetColumnShowsAShareBelowTheWholeBudgetAndBudgetsFromIt() throws {
        var summary = SummaryAggregator()
        summary.add(intervalPoint: try intervalPoint("/a", country: "BR", count: 1_000, errors: 1_000))
        summary.add(intervalPoint: try intervalPoint("/b", country: "BR", count: 2_000, errors: 4))
        summary.add(intervalPoint: try intervalPoint("/c", country: "BR", count: 3_000, errors: 200))
        summary.add(intervalPoint: try intervalPoint("/d", country: "BR", count: 10_000, errors: 4))
        summary.add(intervalPoint: try intervalPoint("/e", country: "BR", count: 10_000, errors: 10))
        let table = SummaryTable(width: 250, colors: false).render(
            SummaryOrder.endpoint.sorted(summary.rows()),
            counts: summary.counts
        )
        let header = try #require(cells(table, startingWith: "METHOD"))
        let used = try #require(header.firstIndex(of: "A.USED"))
        func budget(_ path: String) -> String? {
            cells(table, startingWith: "POST    127.0.0.1:38211\(path) ").map { $0[used] }
        }
        #expect(budget("/a") == "1000×", "\(table)")
        #expect(budget("/b") == "2.0×", "\(table)")
        #expect(budget("/c") == "67×", "200 of 3,000 is 66.7 budgets: \(table)")
        #expect(budget("/d") == "40%", "\(table)")
        #expect(budget("/e") == "1.0×", "exactly the budget: \(table)")
        #expect(!table.contains("00%"), "\(table)")
    }

    @Test func aLongEndpointKeepsTheEndOfItsPathAndLosesALoopbackHostFirst() {
        #expect(SummaryTable.fitEndpoint(host: "127.0.0.1:38211", path: "/checkout/orders", 20) == "…/checkout/orders")
        #expect(SummaryTable.fitEndpoint(host: "localhost:8080", path: "/checkout/orders", 20) == "…/checkout/orders")
        #expect(SummaryTable.fitEndpoint(host: "[::1]:8080", path: "/checkout/orders", 20) == "…/checkout/orders")
        #expect(
            SummaryTable.fitEndpoint(host: "api.example.com", path: "/checkout/orders", 22) == "api.e…/checkout/orders"
        )
        #expect(SummaryTable.fitEndpoint(host: "api.example.com", path: "/checkout/orders", 12) == "…kout/orders")
        #expect(
            SummaryTable.fitEndpoint(host: "api.example.com", path: "/checkout/orders", 31)
                == "api.example.com/checkout/orders",
            "what fits is whole"
        )

        // In a table too narrow for it, the loopback endpoint keeps its path whole.
        var summary = SummaryAggregator()
        summary.add(
            Array(
                "apihealth_request,host=127.0.0.1:38211,method=POST,path=/checkout/orders,status=201 duration_ms=5 1700000000000000000"
                    .utf8
            )
        )
        let table = SummaryTable(width: 54, colors: false).render(summary.rows(), counts: summary.counts)
        let lines = table.split(separator: "\n")
        #expect(lines.allSatisfy { $0.count <= 54 }, "\(table)")
        #expect(lines.contains { $0.hasPrefix("POST    …/checkout/orders ") }, "\(table)")
        #expect(!table.contains("127.0.…"), "\(table)")
    }
}

/// The JSON lines the summary and `influx-tail --format json` print, through JSONEncoder.
@Suite struct JSONLinesTests {
    @Test func controlCharactersOfASpoolLineCannotReachTheTerminal() throws {
        let hostile = "a\u{1B}[31mred\u{9B}2J\u{7F}\"\\\n"
        let line = JSONLines.line(JSONObject().adding("host", hostile))
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1)
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value) })
        let decoded = try #require(
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        )
        #expect(decoded["host"] as? String == hostile)
    }

    @Test func wholeNumbersHaveNoFractionAndNonFiniteOnesAreNull() {
        let line = JSONLines.line(
            JSONObject().adding("whole", JSONNumber(20)).adding("half", JSONNumber(0.5))
                .adding("nan", JSONNumber(.nan)).adding("none", JSONNumber(nil)).adding("absent", nil as String?)
        )
        #expect(line == #"{"absent":null,"half":0.5,"nan":null,"none":null,"whole":20}"# + "\n")
    }
}
