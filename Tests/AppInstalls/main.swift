// An app's installs, measured (scripts/app-installs runs it, with the servers it needs):
//   app-installs installs N   N installs, one agent each, into InfluxDB 1.x (APIHEALTH_TEST_INFLUXDB1_URL) and
//                             VictoriaMetrics (APIHEALTH_TEST_VICTORIA_URL): requests made, counted, series
//   app-installs budget       what one install sends in an hour of a typical app's traffic (20 endpoints, one
//                             request a second in all) with the app preset, to a loopback write endpoint
@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport

let arguments = CommandLine.arguments.dropFirst()

/// What one install sends in one hour: bytes of the HTTP requests (request line, headers, gzipped body).
struct Budget {
    var posts = 0
    var bodyBytes = 0
    var headerBytes = 0
    var lines = 0
    var peakPendingBytes = 0
}

func measureBudget() async throws -> Budget {
    let received = Locked(Budget())
    let server = try await LoopbackHTTPServer.start { request in
        received.withLock { budget in
            budget.posts += 1
            budget.bodyBytes += request.body.count
            budget.headerBytes +=
                request.method.utf8.count + request.uri.utf8.count + 11
                + request.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + 2
            if let lines = try? Gzip.decompress(request.body) {
                budget.lines += lines.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            }
        }
        return .text(204, "")
    }
    var configuration = APIHealthConfiguration.app(
        "shop-ios",
        version: "4.2.0",
        destination: InfluxDestination(
            url: URL(string: server.baseURL)!,
            api: .v2(organization: "shop", bucket: "apps"),
            token: InfluxToken("write-only-token")
        )
    )
    configuration.country = "BR"
    configuration.spool = nil
    // The health points are recorded by the run, four an hour as the preset's 15 minutes make them.
    configuration.selfMetricsInterval = noPeriodicHealthPoint
    let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "budget"))
    agent.start()
    let endpoints = [
        "/v2/home", "/v2/feed", "/v2/products/{n}", "/v2/products/{n}/reviews", "/v2/search", "/v2/cart",
        "/v2/cart/items", "/v2/checkout", "/v2/orders", "/v2/orders/{n}", "/v2/profile", "/v2/addresses",
        "/v2/payment-methods", "/v2/notifications", "/v2/recommendations", "/v2/categories",
        "/v2/categories/{n}", "/v2/stores", "/v2/config", "/v2/session",
    ]
    var generator = SeededGenerator(state: 2_026)
    let minute: Int64 = 60_000_000_000
    let hourStart = (Timestamp.systemNow().nanosecondsSinceEpoch / minute - 120) * minute
    var peak = 0
    for chunk in 0..<12 {
        for interval in 0..<5 {
            let start = hourStart + Int64(chunk * 5 + interval) * minute
            for second in 0..<60 {
                let path = endpoints[Int.random(in: 0..<endpoints.count, using: &generator)]
                    .replacingOccurrences(of: "{n}", with: "\(Int.random(in: 1...90_000, using: &generator))")
                let roll = Int.random(in: 0..<1_000, using: &generator)
                agent.record(
                    RequestSample(
                        method: path.hasSuffix("checkout") ? "POST" : "GET",
                        url: URL(string: "https://api.shop.example\(path)")!,
                        module: "shop",
                        startedAt: Date(timeIntervalSince1970: Double(start / 1_000_000_000 + Int64(second))),
                        duration: .milliseconds(Int64(40 + Int.random(in: 0..<400, using: &generator))),
                        statusCode: roll < 5 ? nil : roll < 15 ? 500 : roll < 25 ? 404 : 200,
                        error: roll < 5 ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1009) : nil,
                        requestBytes: 0,
                        responseBytes: UInt64(Int.random(in: 500..<20_000, using: &generator))
                    )
                )
            }
            agent.recordIntervalPoints(endingAt: Timestamp(nanosecondsSinceEpoch: start + minute))
        }
        if chunk % 3 == 2 { agent.recordHealthPoint() }
        peak = max(peak, agent.metrics.pendingBytes)
        // The preset's maximum age: a batch every 5 minutes.
        _ = await agent.flush(waitingUpTo: .seconds(60))
    }
    // The hour's posts; shutdown's own (the last health point) is not an hour's traffic.
    var budget = received.withLock { $0 }
    await agent.shutdown(deadline: .seconds(60))
    try await server.shutdown()
    budget.peakPendingBytes = peak
    return budget
}

switch arguments.first {
case "installs":
    // Ten installs first, then N: the series count must be the same for both.
    let installs = Int(arguments.dropFirst().first ?? "") ?? 1_000
    let influx = try await InfluxDB1.freshDatabase("installs")
    for count in [10, installs] {
        let run = AppInstalls(
            installs: count,
            influx: influx,
            victoria: try VictoriaMetrics(),
            service: "installs_\(count)"
        )
        let result = try await run.run()
        let suffix = count == installs ? "" : "-\(count)"
        print("installs\(suffix) \(result.installs)")
        print("requests-made\(suffix) \(result.requestsMade)")
        print("counted-influxdb\(suffix) \(result.countedInInfluxDB)")
        print("counted-victoriametrics\(suffix) \(result.countedInVictoriaMetrics)")
        print("series-influxdb\(suffix) \(result.seriesInInfluxDB)")
        print("series-victoriametrics\(suffix) \(result.seriesInVictoriaMetrics)")
    }
case "budget":
    let budget = try await measureBudget()
    print("posts-per-hour \(budget.posts)")
    print("lines-per-hour \(budget.lines)")
    print("body-bytes-per-hour \(budget.bodyBytes)")
    print("header-bytes-per-hour \(budget.headerBytes)")
    print("bytes-per-hour \(budget.bodyBytes + budget.headerBytes)")
    print("peak-pending-bytes \(budget.peakPendingBytes)")
default:
    print("usage: app-installs installs N | app-installs budget")
    exit(2)
}
