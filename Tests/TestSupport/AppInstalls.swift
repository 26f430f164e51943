@_spi(Benchmarking) import APIHealth
import Foundation
import LineProtocol
import Logging

/// Many installs of one app, each its own agent in this process with the app preset (no `instance` tag),
/// a country of its own and known traffic, writing to the real InfluxDB 1.x and VictoriaMetrics: what a
/// fleet of phones does to one database, in seconds. The interval is ended by the run, at a whole minute
/// in the past, so every install's points belong to the same interval of the same series.
public struct AppInstalls: Sendable {
    /// What one run made and what each destination kept.
    public struct Result: Sendable, CustomStringConvertible {
        public var installs: Int
        public var requestsMade: Int
        public var countedInInfluxDB: Int
        public var countedInVictoriaMetrics: Int
        /// Interval-point series of the run's service in each destination.
        public var seriesInInfluxDB: Int
        public var seriesInVictoriaMetrics: Int

        public var description: String {
            "\(installs) installs: \(requestsMade) requests made; counted \(countedInInfluxDB) in InfluxDB 1.x, "
                + "\(countedInVictoriaMetrics) in VictoriaMetrics; \(seriesInInfluxDB) series in InfluxDB, "
                + "\(seriesInVictoriaMetrics) in VictoriaMetrics"
        }
    }

    /// A relay the installs write to instead of the databases, with the app key they send; the relay
    /// forwards to both. Each install sends an `X-Forwarded-For` address of its own.
    public struct Relay: Sendable {
        public var url: URL
        public var key: String
        /// Sends the key as `Authorization: Bearer` (a header vmauth routes on) instead of the token's `Token`.
        public var bearer: Bool

        public init(url: URL, key: String, bearer: Bool = false) {
            self.url = url
            self.key = key
            self.bearer = bearer
        }
    }

    public static let countries = ["BR", "DE", "US", "IN", "JP"]
    public static let paths = ["/products/{n}", "/cart", "/search", "/orders/{n}"]

    public var installs: Int
    public var requestsPerInstall: Int
    public var influx: InfluxDB1
    public var victoria: VictoriaMetrics
    /// The `service` tag, unique per run: the destinations are shared with other tests.
    public var service: String
    /// Where the installs write; `nil`: straight to both databases.
    public var relay: Relay?

    public init(
        installs: Int,
        requestsPerInstall: Int = 50,
        influx: InfluxDB1,
        victoria: VictoriaMetrics,
        service: String,
        relay: Relay? = nil
    ) {
        self.relay = relay
        self.installs = installs
        self.requestsPerInstall = requestsPerInstall
        self.influx = influx
        self.victoria = victoria
        self.service = service
    }

    /// The interval every install's requests fall in: the minute that ended ten minutes ago.
    public static func intervalEnd() -> Int64 {
        let minute: Int64 = 60_000_000_000
        return (Timestamp.systemNow().nanosecondsSinceEpoch / minute - 10) * minute
    }

    /// Runs the installs: each records its requests, ends the interval, and ships to both destinations
    /// as it shuts down; then counts what the destinations hold.
    public func run() async throws -> Result {
        let end = Self.intervalEnd()
        var agents: [APIHealthAgent] = []
        var made = 0
        for install in 0..<installs {
            var configuration = APIHealthConfiguration.app(
                service,
                version: "4.2.0",
                destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
            )
            if let relay {
                var destination = InfluxDestination(
                    url: relay.url,
                    api: .v2(organization: "acme", bucket: "apps"),
                    token: relay.bearer ? nil : InfluxToken(relay.key)
                )
                if relay.bearer { destination.headers["Authorization"] = "Bearer \(relay.key)" }
                destination.headers["X-Forwarded-For"] =
                    "10.\(install >> 16 & 255).\(install >> 8 & 255).\(install & 255)"
                configuration.destinations = [destination]
            } else {
                configuration.destinations.append(
                    InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apps"))
                )
            }
            configuration.country = Self.countries[install % Self.countries.count]
            configuration.spool = nil
            configuration.batching.flushJitter = .zero
            configuration.selfMetricsInterval = noPeriodicHealthPoint
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "install-\(install)"))
            var generator = SeededGenerator(state: UInt64(install) &+ 1)
            for request in 0..<requestsPerInstall {
                let path = Self.paths[request % Self.paths.count].replacingOccurrences(
                    of: "{n}",
                    with: "\(UInt32.random(in: 1...50_000, using: &generator))"
                )
                // The same statuses at the same places in every install's traffic, so every install
                // writes the same endpoints: 4 % transport errors, 10 % 503s.
                let roll = request % 25 == 24 ? 0 : request % 10 == 9 ? 5 : 50
                let offset = Double(UInt32.random(in: 1...59_000, using: &generator)) / 1_000
                agent.record(
                    RequestSample(
                        method: "GET",
                        url: URL(string: "https://api.shop.example\(path)")!,
                        module: "shop",
                        startedAt: Date(timeIntervalSince1970: Double(end / 1_000_000_000) - 60 + offset),
                        duration: .milliseconds(Int64(UInt32.random(in: 20...900, using: &generator))),
                        statusCode: roll < 3 ? nil : roll < 8 ? 503 : 200,
                        error: roll < 3 ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001) : nil
                    )
                )
                made += 1
            }
            agent.recordIntervalPoints(endingAt: Timestamp(nanosecondsSinceEpoch: end))
            agents.append(agent)
        }
        // Shipped by each install's own shippers, a few dozen installs at a time.
        for group in stride(from: 0, to: agents.count, by: 50) {
            let batch = agents[group..<min(group + 50, agents.count)]
            for agent in batch { agent.start() }
            await withTaskGroup(of: Void.self) { shutdowns in
                for agent in batch { shutdowns.addTask { await agent.shutdown(deadline: .seconds(120)) } }
            }
        }
        let measurement = PointSchema.Measurement.requestInterval
        var result = Result(
            installs: installs,
            requestsMade: made,
            countedInInfluxDB: 0,
            countedInVictoriaMetrics: 0,
            seriesInInfluxDB: 0,
            seriesInVictoriaMetrics: 0
        )
        _ = try await waitUntil {
            let rows = try await influx.query(
                "SELECT sum(\"count\") FROM \"\(measurement)\" WHERE \"service\" = '\(service)'"
            )
            result.countedInInfluxDB = (rows.first?.rows.first?["sum"] as? NSNumber)?.intValue ?? 0
            return result.countedInInfluxDB >= made
        }
        let series = try await influx.query(
            "SELECT count(\"count\") FROM \"\(measurement)\" WHERE \"service\" = '\(service)' GROUP BY *"
        )
        result.seriesInInfluxDB = series.count
        _ = try await waitUntil {
            let exported = try await victoria.export(namePattern: "\(measurement)_count")
                .filter { $0.labels["service"] == service }
            result.countedInVictoriaMetrics = Int(exported.reduce(0) { $0 + $1.values.reduce(0, +) })
            result.seriesInVictoriaMetrics = exported.count
            return result.countedInVictoriaMetrics >= made
        }
        return result
    }
}
