@_spi(Package) @_spi(Benchmarking) import APIHealth
import Foundation

/// The built `apihealth-relay`, run as a real child process on a free loopback port, forwarding to the test
/// InfluxDB 1.x database and VictoriaMetrics, with a spool of its own (kept across a restart).
public final class RelayProcess: Sendable {
    public let port: Int
    public let spool: URL
    private let environment: [String: String]
    /// Guards the running child.
    private let child = Locked<Child?>(nil)

    /// A relay forwarding to `influx` and `victoria`; `settings` are more `APIHEALTH_RELAY_*` variables.
    public init(
        keys: String,
        influx: InfluxDB1,
        victoria: VictoriaMetrics,
        settings: [String: String] = [:]
    ) throws {
        port = try VictoriaProcess.freePort()
        spool = FileManager.default.temporaryDirectory.appendingPathComponent("apihealth-relay-\(UUID().uuidString)")
        var environment = [
            "APIHEALTH_RELAY_KEYS": keys,
            "APIHEALTH_RELAY_HOST": "127.0.0.1",
            "APIHEALTH_RELAY_PORT": "\(port)",
            "APIHEALTH_RELAY_CLIENT_HEADER": "X-Forwarded-For",
            "APIHEALTH_SPOOL_DIR": spool.path,
            "APIHEALTH_FLUSH_DELAY_MS": "200",
            "APIHEALTH_INSTANCE": "relay-\(port)",
            "INFLUX_URL": influx.base.absoluteString,
            "INFLUX_WRITE_API": "v1",
            "INFLUX_DATABASE": influx.database,
            "INFLUX_2_URL": victoria.base.absoluteString,
            "INFLUX_2_ORG": "acme",
            "INFLUX_2_BUCKET": "apps",
        ]
        for (name, value) in settings { environment[name] = value }
        self.environment = environment
    }

    deinit {
        stop(signal: SIGKILL)
        try? FileManager.default.removeItem(at: spool)
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts it (again, on the same port and spool) and waits until it answers `/health`.
    public func start() async throws {
        let child = try Child("apihealth-relay", [], environment: environment)
        self.child.withLock { $0 = child }
        var answered = false
        _ = await waitUntil {
            if let reply = try? await HTTP.send("GET", url.appendingPathComponent("health")), reply.status == 200 {
                answered = true
            }
            return answered || !child.process.isRunning
        }
        guard answered else {
            throw TestFailure(message: "apihealth-relay did not start: \(child.stderr.suffix(3_000))")
        }
    }

    /// Stops it with `signal` (SIGTERM: it finishes what it took and sends it; SIGKILL: at once) and waits
    /// for it to exit. Returns its exit status and what it logged.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> (status: Int32, log: String)? {
        guard let child = child.withLock({ $0.take() }) else { return nil }
        if child.process.isRunning { child.signal(signal) }
        child.process.waitUntilExit()
        return (child.process.terminationStatus, child.stderr)
    }

    /// POSTs `lines` with `key` (gzipped), as client `client`.
    public func write(
        _ lines: String,
        key: String?,
        client: String = "192.0.2.1",
        precision: String = "ns"
    ) async throws -> HTTP.Reply {
        var headers = ["X-Forwarded-For": client, "Content-Encoding": "gzip"]
        if let key { headers["Authorization"] = "Token \(key)" }
        return try await HTTP.send(
            "POST",
            HTTP.url(url, "/api/v2/write", [("org", "acme"), ("bucket", "apps"), ("precision", precision)]),
            body: Data(try Gzip.compress(Array(lines.utf8))),
            headers: headers
        )
    }
}
