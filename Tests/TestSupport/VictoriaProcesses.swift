@_spi(Package) import APIHealth
import Foundation

/// A real VictoriaMetrics component (`victoria-metrics`, `vmauth`, `vmagent` from Debian's
/// `victoria-metrics` package, which `scripts/test` installs) that a test starts on a free loopback
/// port, stops with SIGTERM (so it keeps what it acknowledged) and starts again on the same port.
public final class VictoriaProcess: Sendable {
    public let port: Int
    public let directory: URL
    private let executable: String
    private let arguments: @Sendable (Int, URL) -> [String]
    /// Guards the running process.
    private let process = Locked<Process?>(nil)

    /// The executable's path, or a failure saying what to install.
    public static func path(of executable: String) throws -> String {
        for folder in ["/usr/bin", "/usr/local/bin"]
        where FileManager.default.isExecutableFile(atPath: "\(folder)/\(executable)") {
            return "\(folder)/\(executable)"
        }
        throw TestFailure(
            message: "\(executable) is missing: run the suite with scripts/test, which installs victoria-metrics"
        )
    }

    private init(executable: String, arguments: @escaping @Sendable (Int, URL) -> [String]) throws {
        self.executable = try Self.path(of: executable)
        self.arguments = arguments
        port = try Self.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apihealth-\(executable)-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A single-node VictoriaMetrics with its own data directory.
    public static func victoriaMetrics() async throws -> VictoriaProcess {
        let server = try VictoriaProcess(executable: "victoria-metrics") { port, directory in
            [
                "-storageDataPath", directory.appendingPathComponent("data").path, "-httpListenAddr",
                "127.0.0.1:\(port)",
                "-retentionPeriod=100y", "-search.latencyOffset=0s", "-loggerLevel=ERROR",
            ]
        }
        try await server.start()
        return server
    }

    /// `vmauth` with the routing `config` (YAML).
    public static func vmauth(config: String) async throws -> VictoriaProcess {
        let server = try VictoriaProcess(executable: "vmauth") { port, directory in
            [
                "-auth.config", directory.appendingPathComponent("auth.yml").path, "-httpListenAddr",
                "127.0.0.1:\(port)",
                "-loggerLevel=ERROR",
            ]
        }
        try Data(config.utf8).write(to: server.directory.appendingPathComponent("auth.yml"))
        try await server.start()
        return server
    }

    /// `vmagent` relaying what it takes to `remoteWrite` (a VictoriaMetrics' `/api/v1/write`).
    public static func vmagent(remoteWrite: URL) async throws -> VictoriaProcess {
        let server = try VictoriaProcess(executable: "vmagent") { port, directory in
            [
                "-remoteWrite.url", remoteWrite.absoluteString, "-httpListenAddr", "127.0.0.1:\(port)",
                "-remoteWrite.tmpDataPath", directory.appendingPathComponent("buffer").path, "-loggerLevel=ERROR",
                "-remoteWrite.flushInterval=100ms",
            ]
        }
        try await server.start()
        return server
    }

    /// Starts it (again) and waits until it answers `/health`.
    public func start() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments(port, directory)
        process.standardOutput = FileHandle.nullDevice
        let log = directory.appendingPathComponent("log-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process.withLock { $0 = process }
        var answered = false
        _ = await waitUntil(timeout: .seconds(60)) {
            if let reply = try? await HTTP.send("GET", url.appendingPathComponent("health")), reply.status == 200 {
                answered = true
            }
            return answered || !process.isRunning
        }
        if answered { return }
        if !process.isRunning {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw TestFailure(message: "\(executable) exited: \(text.suffix(2_000))")
        }
        throw TestFailure(message: "\(executable) did not answer /health within 60 s")
    }

    /// Stops it with SIGTERM and waits for it to exit: what it acknowledged is kept.
    public func stop() {
        guard let process = self.process.withLock({ $0.take() }), process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// A loopback port nothing listens on now (bound and let go at once).
    public static func freePort() throws -> Int {
        try RefusingPort().port
    }
}
