@_spi(Benchmarking) import APIHealth
import Foundation

/// A client for the real VictoriaMetrics the test script starts: write with `/api/v2/write`, read back
/// with `/api/v1/export`.
public struct VictoriaMetrics: Sendable {
    public var base: URL

    public init() throws {
        base = try TestServers.victoriaMetrics()
    }

    /// A client for the VictoriaMetrics at `base` (one a test started itself).
    public init(base: URL) {
        self.base = base
    }

    /// POSTs gzipped line protocol to `/api/v2/write`.
    package func write(
        _ lines: [UInt8],
        precision: String = "ns",
        gzip implementation: Gzip.Implementation = Gzip.implementation
    ) async throws -> HTTP.Reply {
        var body: [UInt8] = []
        try Gzip.compress(lines, level: 6, using: implementation, into: &body)
        return try await HTTP.send(
            "POST",
            HTTP.url(base, "/api/v2/write", [("org", "apihealth"), ("bucket", "tests"), ("precision", precision)]),
            body: Data(body),
            headers: ["Content-Encoding": "gzip"]
        )
    }

    /// One exported series: its labels, and its samples in time order.
    public struct Series: Sendable {
        public var labels: [String: String]
        public var values: [Double]
        public var timestamps: [Int64]
    }

    /// The rows VictoriaMetrics has refused since it started (`vm_rows_invalid_total`, every type),
    /// which a write's 204 does not show.
    public func invalidRows() async throws -> Double {
        let reply = try await HTTP.send("GET", HTTP.url(base, "/metrics"))
        guard reply.status == 200 else { throw TestFailure(message: "metrics: \(reply.status)") }
        var total = 0.0
        for line in reply.text.split(separator: "\n") where line.hasPrefix("vm_rows_invalid_total") {
            total += Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return total
    }

    /// Every series whose labels match the series selector `selector` (e.g. `{case="q1"}`).
    public func export(matching selector: String) async throws -> [Series] {
        try await forceFlush()
        let reply = try await HTTP.send(
            "POST",
            HTTP.url(base, "/api/v1/export", [("match[]", selector), ("start", "0")])
        )
        guard reply.status == 200 else { throw TestFailure(message: "export: \(reply.status) \(reply.text)") }
        return try reply.text.split(separator: "\n").compactMap { line -> Series? in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                return nil
            }
            return Series(labels: object["metric"] as? [String: String] ?? [:], values: [], timestamps: [])
        }
    }

    /// One series of an instant query's answer.
    public struct Sample: Sendable {
        public var labels: [String: String]
        public var value: Double
    }

    /// Runs a PromQL/MetricsQL instant query (`/api/v1/query`) at `time` (Unix seconds).
    public func query(_ expression: String, at time: Double) async throws -> [Sample] {
        try await forceFlush()
        let reply = try await HTTP.send(
            "POST",
            HTTP.url(base, "/api/v1/query", [("query", expression), ("time", String(time)), ("nocache", "1")])
        )
        guard reply.status == 200,
            let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any],
            let data = object["data"] as? [String: Any], let result = data["result"] as? [[String: Any]]
        else { throw TestFailure(message: "query \(expression): \(reply.status) \(reply.text)") }
        return result.map { series in
            let value = (series["value"] as? [Any])?.last.map { Double(String(describing: $0)) ?? .nan } ?? .nan
            return Sample(labels: series["metric"] as? [String: String] ?? [:], value: value)
        }
    }

    /// Makes recent writes searchable at once.
    public func forceFlush() async throws {
        _ = try await HTTP.send("GET", HTTP.url(base, "/internal/force_flush"))
    }

    /// Every series whose metric name matches the regular expression `namePattern`.
    public func export(namePattern: String) async throws -> [Series] {
        try await forceFlush()
        let reply = try await HTTP.send(
            "POST",
            HTTP.url(base, "/api/v1/export", [("match[]", "{__name__=~\"\(namePattern)\"}"), ("start", "0")])
        )
        guard reply.status == 200 else { throw TestFailure(message: "export: \(reply.status) \(reply.text)") }
        var series: [Series] = []
        for line in reply.text.split(separator: "\n") where !line.isEmpty {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                continue
            }
            let labels = object["metric"] as? [String: String] ?? [:]
            let values = (object["values"] as? [Any] ?? []).map { value -> Double in
                if let number = value as? NSNumber { return number.doubleValue }
                return Double(String(describing: value)) ?? .nan
            }
            let timestamps = (object["timestamps"] as? [NSNumber] ?? []).map { $0.int64Value }
            series.append(Series(labels: labels, values: values, timestamps: timestamps))
        }
        return series
    }
}
