@_spi(Benchmarking) import APIHealth
import Foundation

/// A client for the real InfluxDB 1.x the test script starts: create a database, write, query.
public struct InfluxDB1: Sendable {
    public var base: URL
    public var database: String

    /// A fresh database with a unique name on the test server.
    public static func freshDatabase(_ prefix: String = "t") async throws -> InfluxDB1 {
        let base = try TestServers.influxDB1()
        let name = "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
        let client = InfluxDB1(base: base, database: name)
        let reply = try await HTTP.send("POST", HTTP.url(base, "/query", [("q", "CREATE DATABASE \"\(name)\"")]))
        guard reply.status == 200 else { throw TestFailure(message: "CREATE DATABASE: \(reply.status) \(reply.text)") }
        return client
    }

    /// POSTs line protocol to `/write`, gzipped. Returns the status and body.
    package func write(
        _ lines: [UInt8],
        precision: String = "ns",
        gzip implementation: Gzip.Implementation = Gzip.implementation
    ) async throws -> HTTP.Reply {
        var body: [UInt8] = []
        try Gzip.compress(lines, level: 6, using: implementation, into: &body)
        return try await HTTP.send(
            "POST",
            HTTP.url(base, "/write", [("db", database), ("precision", precision)]),
            body: Data(body),
            headers: ["Content-Encoding": "gzip", "Content-Type": "text/plain; charset=utf-8"]
        )
    }

    /// Waits until every point of `lines` answers a query: for each measurement, until a count of its first line's
    /// first field equals its number of lines (each line one point; lines of a measurement share that field).
    /// InfluxDB 1.x acknowledges a write before every shard it touched answers queries: a history written across a
    /// shard-group boundary was seen in part, older shard first, by queries sent right after its `204` under load.
    package func waitUntilQueryable(_ lines: [UInt8]) async throws -> Bool {
        var written: [String: (field: String, count: Int)] = [:]
        for line in lines.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            guard let space = text.firstIndex(of: " ") else { continue }
            let measurement = String(text[..<space].prefix { $0 != "," })
            let field = String(text[text.index(after: space)...].prefix { $0 != "=" })
            written[measurement, default: (field, 0)].count += 1
        }
        return try await waitUntil {
            for (measurement, expected) in written {
                let series = try await query("SELECT count(\"\(expected.field)\") FROM \"\(measurement)\"")
                let count = (series.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0
                if count != expected.count { return false }
            }
            return true
        }
    }

    /// One series of a query result.
    public struct Series: @unchecked Sendable {
        public var name: String
        public var tags: [String: String]
        public var columns: [String]
        public var values: [[Any]]

        /// The rows as column-name → value dictionaries (NSNull for nulls).
        public var rows: [[String: Any]] {
            values.map { Dictionary(uniqueKeysWithValues: zip(columns, $0)) }
        }
    }

    /// Runs InfluxQL with `epoch=ns` and returns every series of the first statement.
    public func query(_ influxQL: String) async throws -> [Series] {
        let reply = try await HTTP.send(
            "POST",
            HTTP.url(base, "/query", [("db", database), ("epoch", "ns"), ("q", influxQL)])
        )
        guard reply.status == 200 else {
            throw TestFailure(message: "query \(influxQL): \(reply.status) \(reply.text)")
        }
        guard let root = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any],
            let results = root["results"] as? [[String: Any]], let first = results.first
        else { throw TestFailure(message: "unexpected query reply \(reply.text)") }
        if let error = first["error"] as? String { throw TestFailure(message: "query \(influxQL): \(error)") }
        let series = first["series"] as? [[String: Any]] ?? []
        return series.map { entry in
            Series(
                name: entry["name"] as? String ?? "",
                tags: entry["tags"] as? [String: String] ?? [:],
                columns: entry["columns"] as? [String] ?? [],
                values: entry["values"] as? [[Any]] ?? []
            )
        }
    }
}
