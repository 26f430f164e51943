import APIHealth
import APIHealthTestKit
import Foundation
import TestSupport
import Testing

/// The README's code works as written: its Swift is the `readme-example` service (Tests/ReadmeExample)
/// and, for the Vapor block, the `readme-vapor-example` application (Tests/ReadmeVaporExample), both
/// built with the tests and run here against a real API and a real InfluxDB 1.x.
@Suite struct ReadmeTests {
    /// The README's fenced Swift blocks, in order.
    static func swiftBlocks() throws -> [[String]] {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        var blocks: [[String]] = []
        var open: [String]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if open == nil, line == "```swift" {
                open = []
            } else if open != nil, line == "```" {
                blocks.append(open!)
                open = nil
            } else {
                open?.append(line)
            }
        }
        return blocks
    }

    /// A line as compared: without its indentation, each run of spaces as one.
    static func normalized(_ line: String) -> String {
        line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    @Test func theReadmeIsShort() throws {
        let size = try Data(contentsOf: repositoryRoot.appendingPathComponent("README.md")).count
        #expect(size <= 12_000, "README.md is \(size) bytes: the rest belongs in the DocC articles")
    }

    @Test func everyLineOfTheReadmesSwiftIsInTheExampleService() throws {
        let blocks = try Self.swiftBlocks()
        #expect(blocks.count >= 6, "Package.swift, URLSession, AsyncHTTPClient, Vapor, swift-metrics, filter")
        var exampleLines = Set<String>()
        for example in ["Tests/ReadmeExample/main.swift", "Tests/ReadmeVaporExample/main.swift"] {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(example), encoding: .utf8)
            exampleLines.formUnion(text.split(separator: "\n").map { Self.normalized(String($0)) })
        }
        for block in blocks where !block.contains(where: { $0.hasPrefix("// Package.swift") }) {
            for line in block.map(Self.normalized) where !line.isEmpty {
                let found = exampleLines.contains(line)
                #expect(found, "README line in neither Tests/ReadmeExample nor Tests/ReadmeVaporExample: \(line)")
            }
        }
    }

    @Test func theReadmesPackageLinesNameRealProductsAndTheMinimumPlatforms() throws {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let block = try #require(try Self.swiftBlocks().first { $0.contains { $0.hasPrefix("// Package.swift") } })
        let named = block.compactMap { line -> String? in
            guard line.contains("package: \"APIHealth\"") else { return nil }
            return line.firstMatch(of: /\.product\(name: "([^"]+)"/).map { String($0.1) }
        }
        #expect(named.count >= 4)
        for product in named {
            #expect(manifest.contains(".library(name: \"\(product)\""), "README names a product \(product)")
        }
        let platforms = try #require(block.first { $0.hasPrefix("platforms:") })
        for platform in [".macOS(.v13)", ".iOS(.v16)"] {
            #expect(platforms.contains(platform) && manifest.contains(platform))
        }
    }

    @Test func theReadmesServiceRecordsItsCallsAndSendsThemOnSIGTERM() async throws {
        let influx = try await InfluxDB1.freshDatabase("readme")
        let api = try await LoopbackHTTPServer.start { request in
            switch request.path {
            case "/charges/42": .json(200, #"{"id": "ch_42"}"#)
            case "/invoices/7": .json(200, #"{"total": 1200}"#)
            default: .text(200, "<html>maintenance</html>")
            }
        }
        let spool = temporaryDirectory("readme")
        let service = try Child(
            "readme-example",
            [],
            environment: [
                "API_URL": api.baseURL, "INFLUX_URL": influx.base.absoluteString, "INFLUX_WRITE_API": "v1",
                "INFLUX_DATABASE": influx.database, "APIHEALTH_SPOOL_DIR": spool.path,
                "APIHEALTH_FLUSH_DELAY_MS": "60000", "APIHEALTH_RAW_POINTS": "all",
            ]
        )
        #expect(await waitUntil { service.arrival(ofLine: "called") != nil || !service.process.isRunning })
        service.signal(SIGTERM)
        let status = await service.wait()
        #expect(status == 0, "\(service.stderr)")
        #expect(service.stdout == "charge ch_42\nnot a charge\ninvoice 15 bytes\ncalled\n")

        let requests = try await influx.query(
            #"SELECT count("duration_ms") FROM "apihealth_request" GROUP BY "module", "path", "status""#
        )
        let counted = Dictionary(
            uniqueKeysWithValues: requests.map {
                (
                    "\($0.tags["module"] ?? "") \($0.tags["path"] ?? "") \($0.tags["status"] ?? "")",
                    $0.rows.first?["count"] as? NSNumber
                )
            }
        )
        #expect(
            counted.mapValues { $0?.intValue } == [
                "payments /charges/{id} 200": 2, "billing /invoices/{id} 200": 1,
            ],
            "one point for each call, through URLSession and AsyncHTTPClient"
        )
        let failures = try await influx.query(#"SELECT "count" FROM "apihealth_parse_failure""#)
        #expect(failures.first?.values.count == 1, "the response that was not a Charge")
        let orders = try await influx.query(#"SELECT last("count") FROM "checkout_orders""#)
        #expect((orders.first?.rows.first?["last"] as? NSNumber)?.intValue == 1, "the swift-metrics counter")
        #expect(try SpoolReader(directory: spool).segments().allSatisfy { $0.lines.isEmpty }, "nothing left pending")
        try await api.shutdown()
    }

    @Test func theReadmesVaporApplicationRecordsItsClientCallsAndSendsThemOnSIGTERM() async throws {
        let influx = try await InfluxDB1.freshDatabase("readme_vapor")
        let api = try await LoopbackHTTPServer.start { request in
            request.path == "/charges/42" ? .json(200, #"{"id": "ch_42"}"#) : .text(200, "<html>maintenance</html>")
        }
        let spool = temporaryDirectory("readme-vapor")
        let service = try Child(
            "readme-vapor-example",
            ["serve", "--hostname", "127.0.0.1", "--port", "0"],
            environment: [
                "API_URL": api.baseURL, "INFLUX_URL": influx.base.absoluteString, "INFLUX_WRITE_API": "v1",
                "INFLUX_DATABASE": influx.database, "APIHEALTH_SPOOL_DIR": spool.path,
                "APIHEALTH_FLUSH_DELAY_MS": "60000", "APIHEALTH_RAW_POINTS": "all",
            ]
        )
        #expect(
            await waitUntil { service.lines.contains { $0.text.hasPrefix("listening ") } || !service.process.isRunning }
        )
        let port = try #require(
            service.lines.first { $0.text.hasPrefix("listening ") }.flatMap { Int($0.text.dropFirst(10)) },
            "\(service.stderr)"
        )
        for (id, answer) in [("42", "charge ch_42"), ("43", "not a charge")] {
            let reply = try await HTTP.send("GET", URL(string: "http://127.0.0.1:\(port)/checkout/\(id)")!)
            #expect(reply.text == answer)
        }
        service.signal(SIGTERM)
        let status = await service.wait()
        #expect(status == 0, "\(service.stderr)")

        let requests = try await influx.query(
            #"SELECT count("duration_ms") FROM "apihealth_request" GROUP BY "module", "path", "status""#
        )
        let counted = requests.map {
            "\($0.tags["module"] ?? "") \($0.tags["path"] ?? "") \($0.tags["status"] ?? "") "
                + "\(($0.rows.first?["count"] as? NSNumber)?.intValue ?? 0)"
        }
        #expect(counted == ["payments /charges/{id} 200 2"], "both req.client calls, one point each")
        let failures = try await influx.query(#"SELECT "count" FROM "apihealth_parse_failure""#)
        #expect(failures.first?.values.count == 1, "the response that was not a Charge")
        let served = try await influx.query(#"SELECT sum("count") FROM "http_requests_total""#)
        #expect(
            (served.first?.rows.first?["sum"] as? NSNumber)?.intValue == 2,
            "Vapor's own swift-metrics counter, through the same agent"
        )
        #expect(try SpoolReader(directory: spool).segments().allSatisfy { $0.lines.isEmpty }, "nothing left pending")
        try await api.shutdown()
    }
}
