import Foundation
import LineProtocol
import TestSupport
import Testing

@_spi(Benchmarking) @_spi(Package) import APIHealth

/// Hostile writers through the real relay, between honest installs: each refused or throttled with the
/// documented answer, nothing of it in either database (but a key's new series for the hour), the honest
/// installs' points all there.
@Suite struct HostileWritersTests {
    @Test func hostileWritersAreRefusedOrThrottledAndHonestInstallsCountExactly() async throws {
        let influx = try await InfluxDB1.freshDatabase("relay_hostile")
        let victoria = try VictoriaMetrics()
        let service = "relay_hostile_\(UInt32.random(in: 0...UInt32.max))"
        let key = "k-hostile"
        let newSeries = 200
        let relay = try RelayProcess(
            keys: "\(key)=\(service):prod",
            influx: influx,
            victoria: victoria,
            settings: [
                "APIHEALTH_RELAY_CLIENT_LINES_PER_MINUTE": "600",
                "APIHEALTH_RELAY_NEW_SERIES_PER_HOUR": "\(newSeries)",
            ]
        )
        try await relay.start()
        let honest = try await AppInstalls(
            installs: 20,
            influx: influx,
            victoria: victoria,
            service: service,
            relay: AppInstalls.Relay(url: relay.url, key: key)
        ).run()
        #expect(honest.countedInInfluxDB == honest.requestsMade, "\(honest)")
        #expect(honest.countedInVictoriaMetrics == honest.requestsMade, "\(honest)")

        let now = Timestamp.systemNow().nanosecondsSinceEpoch
        func line(_ path: String, _ offset: Int, at time: Int64 = now) -> String {
            "apihealth_request_interval,host=evil.example,path=\(path),service=\(service),status_class=2xx count=1i \(time + Int64(offset))\n"
        }

        // Foreign measurements: a 400 naming every line.
        let foreign = (0..<100).map { "cpu,host=h\($0 % 3),service=\(service) usage=0.5 \(now + Int64($0))\n" }.joined()
        let foreignReply = try await relay.write(foreign, key: key, client: "192.0.2.10")
        #expect(foreignReply.status == 400)
        #expect(foreignReply.text.contains("dropped=100"))
        #expect(Self.refusedLineNumbers(foreignReply) == Array(1...100))

        // Timestamps a year ahead.
        let year: Int64 = 365 * 86_400 * 1_000_000_000
        let ahead = (0..<50).map { line("/future", $0, at: now + year) }.joined()
        let aheadReply = try await relay.write(ahead, key: key, client: "192.0.2.11")
        #expect(aheadReply.status == 400)
        #expect(aheadReply.text.contains("timestamp"))

        // A wrong key, and none.
        let wrong = (0..<50).map { line("/wrong-key", $0) }.joined()
        #expect(try await relay.write(wrong, key: "guessed", client: "192.0.2.12").status == 401)
        #expect(try await relay.write(wrong, key: nil, client: "192.0.2.12").status == 401)

        // 50 MB: refused as received (Content-Length), and gzipped to little (after inflating).
        let huge = String(repeating: line("/huge", 0), count: 50_000_000 / line("/huge", 0).utf8.count + 1)
        let raw = try await HTTP.send(
            "POST",
            HTTP.url(relay.url, "/api/v2/write"),
            body: Data(huge.utf8),
            headers: ["Authorization": "Token \(key)", "X-Forwarded-For": "192.0.2.13"]
        )
        #expect(raw.status == 413)
        #expect(try await relay.write(huge, key: key, client: "192.0.2.14").status == 413)

        // One client at 100 times its rate: 100 writes of a minute's worth, back to back.
        var taken = 0
        var throttled = 0
        for request in 0..<100 {
            let lines = (0..<600).map { line("/rate", request * 600 + $0) }.joined()
            let reply = try await relay.write(lines, key: key, client: "192.0.2.66")
            if reply.status == 204 {
                taken += 1
            } else {
                #expect(reply.status == 429)
                #expect(reply.headers["retry-after"].flatMap { Int($0) }.map { $0 >= 1 && $0 <= 60 } == true)
                throttled += 1
            }
        }
        #expect(taken >= 1 && taken <= 3, "taken \(taken)")
        #expect(throttled == 100 - taken)

        // 100,000 new tag values, from 10 addresses: all but the key's new series for the hour refused.
        var floodAccepted = 0
        for chunk in 0..<10 {
            let flood = (0..<10_000).map { line("/flood/\(chunk * 10_000 + $0)", $0) }.joined()
            let reply = try await relay.write(flood, key: key, client: "198.51.100.\(chunk)")
            #expect(reply.status == 400)
            floodAccepted += 10_000 - Self.dropped(reply)
            #expect(reply.text.contains("series_limit"))
        }
        // The honest installs started some of the hour's new series; the flood had the rest.
        #expect(floodAccepted > 0 && floodAccepted < newSeries, "\(floodAccepted)")
        // An honest install's known series still goes after the flood.
        let known =
            "apihealth_request_interval,app_version=4.2.0,country=BR,host=api.shop.example,method=GET,module=shop,path=/cart,service=\(service),status_class=2xx count=0i \(now)\n"
        #expect(try await relay.write(known, key: key, client: "203.0.113.1").status == 204)

        // What reached the databases once the relay has sent everything (SIGTERM flushes).
        let stopped = relay.stop()
        #expect(stopped?.status == 0)
        let measurements = try await influx.query("SHOW MEASUREMENTS")
        let names = Set(measurements.first?.values.compactMap { $0.first as? String } ?? [])
        #expect(names == ["apihealth_request_interval", "apihealth_agent", "apihealth_relay"])
        func influxCount(_ condition: String) async throws -> Int {
            let rows = try await influx.query(
                "SELECT count(\"count\") FROM \"apihealth_request_interval\" WHERE \(condition)"
            )
            return (rows.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0
        }
        #expect(try await influxCount("\"path\" = '/future' OR \"path\" = '/wrong-key' OR \"path\" = '/huge'") == 0)
        #expect(try await influxCount("\"path\" =~ /^\\/flood/") == floodAccepted)
        #expect(try await influxCount("\"path\" = '/rate'") == taken * 600)
        let honestRows = try await influx.query(
            "SELECT sum(\"count\") FROM \"apihealth_request_interval\" WHERE \"service\" = '\(service)' AND \"host\" = 'api.shop.example'"
        )
        #expect((honestRows.first?.rows.first?["sum"] as? NSNumber)?.intValue == honest.requestsMade)

        let exported = try await victoria.export(matching: "{service=\"\(service)\"}")
        #expect(!exported.isEmpty)
        #expect(!exported.contains { $0.labels["__name__"]?.hasPrefix("cpu") == true })
        #expect(!exported.contains { ["/future", "/wrong-key", "/huge"].contains($0.labels["path"] ?? "") })
        let victoriaHonest = try await victoria.export(namePattern: "apihealth_request_interval_count").filter {
            $0.labels["service"] == service && $0.labels["host"] == "api.shop.example"
        }
        #expect(Int(victoriaHonest.reduce(0) { $0 + $1.values.reduce(0, +) }) == honest.requestsMade)

        // The relay's last health point counts each refusal by its reason.
        let health = try await influx.query("SELECT last(*) FROM \"apihealth_relay\"")
        let row = health.first?.rows.first ?? [:]
        func field(_ name: String) -> Int { (row["last_\(name)"] as? NSNumber)?.intValue ?? -1 }
        #expect(field("refused_measurement") == 100)
        #expect(field("refused_timestamp") == 50)
        #expect(field("refused_key") == 2)
        #expect(field("refused_body_too_large") == 2)
        #expect(field("refused_series_limit") == 100_000 - floodAccepted)
        #expect(field("refused_throttled") == throttled * 600)
        #expect(field("requests_throttled") == throttled)
    }

    /// The refused lines a partial write's answer counts (`dropped=N`; it lists the first 1,000).
    static func dropped(_ reply: HTTP.Reply) -> Int {
        guard let range = reply.text.range(of: "dropped=") else { return 0 }
        return Int(reply.text[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }

    /// The line numbers a partial write's answer lists.
    static func refusedLineNumbers(_ reply: HTTP.Reply) -> [Int] {
        guard let object = try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any],
            let data = object["data"] as? [[String: Any]]
        else { return [] }
        return data.compactMap { ($0["line_number"] as? NSNumber)?.intValue }.sorted()
    }
}
