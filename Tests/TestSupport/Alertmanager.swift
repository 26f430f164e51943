@_spi(Package) import APIHealth
import APIHealthTestKit
import Foundation

/// A real Alertmanager (`prometheus-alertmanager` from Debian's package of that name, which `scripts/test`
/// installs with `amtool`) on a free loopback port, with its own storage folder and no cluster gossip.
///
/// ```swift
/// let receiver = try await LoopbackHTTPServer.start { request in … }      // where the webhooks go
/// let config = try AlertmanagerProcess.config(shipped, webhook: URL(string: receiver.baseURL)!)
/// let alertmanager = try await AlertmanagerProcess.start(config: config)
/// defer { alertmanager.stop() }
/// // vmalert … -notifier.url=\(alertmanager.url)
/// ```
public final class AlertmanagerProcess: Sendable {
    /// The port its web API listens on (127.0.0.1).
    public let port: Int
    /// Its folder: the configuration, the storage and the log.
    public let directory: URL
    /// Guards the running process.
    private let process: Locked<Process?>

    /// Its web API, where vmalert's `-notifier.url` points.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The log it wrote so far (standard error), for a failure's message.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("log.txt"), encoding: .utf8)) ?? ""
    }

    /// The path of `prometheus-alertmanager` or `amtool`, or a failure saying what to install.
    public static func path(of executable: String) throws -> String {
        for folder in ["/usr/bin", "/usr/local/bin"]
        where FileManager.default.isExecutableFile(atPath: "\(folder)/\(executable)") {
            return "\(folder)/\(executable)"
        }
        throw TestFailure(
            message: "\(executable) is missing: run the suite with scripts/test, which installs prometheus-alertmanager"
        )
    }

    /// `config` (an Alertmanager configuration, YAML) with every webhook URL of the shipped file's example receiver
    /// (`http://alert-receiver:9000/…`) sent to `webhook` instead, keeping the path (`/apihealth/page`,
    /// `/apihealth/ticket`).
    public static func config(_ config: String, webhook: URL) -> String {
        var base = webhook.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        return config.replacingOccurrences(of: "http://alert-receiver:9000", with: base)
    }

    /// Starts an Alertmanager with the configuration `config` and waits until it is ready (`/-/ready`). A port
    /// taken between being picked and being bound is retried on another.
    public static func start(config: String) async throws -> AlertmanagerProcess {
        var lastFailure: (any Error)?
        for _ in 0..<5 {
            let alertmanager = try AlertmanagerProcess(config: config)
            do {
                try await alertmanager.run()
                return alertmanager
            } catch {
                alertmanager.stop()
                lastFailure = error
            }
        }
        throw lastFailure ?? TestFailure(message: "prometheus-alertmanager did not start")
    }

    private init(config: String) throws {
        port = try RefusingPort().port
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apihealth-alertmanager-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("storage"),
            withIntermediateDirectories: true
        )
        try Data(config.utf8).write(to: directory.appendingPathComponent("alertmanager.yml"))
        process = Locked(nil)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private func run() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.path(of: "prometheus-alertmanager"))
        process.arguments = [
            "--config.file=\(directory.appendingPathComponent("alertmanager.yml").path)",
            "--storage.path=\(directory.appendingPathComponent("storage").path)",
            "--web.listen-address=127.0.0.1:\(port)", "--cluster.listen-address=", "--log.level=warn",
        ]
        let log = directory.appendingPathComponent("log.txt")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process.withLock { $0 = process }
        var ready = false
        _ = await waitUntil(timeout: .seconds(60)) {
            if let reply = try? await HTTP.send("GET", HTTP.url(url, "/-/ready")), reply.status == 200 {
                ready = true
            }
            return ready || !process.isRunning
        }
        if ready { return }
        if !process.isRunning {
            throw TestFailure(message: "prometheus-alertmanager exited: \(self.log.suffix(2_000))")
        }
        throw TestFailure(message: "prometheus-alertmanager was not ready within 60 s: \(self.log.suffix(2_000))")
    }

    /// Stops it with SIGTERM and waits for it to exit.
    public func stop() {
        guard let process = self.process.withLock({ $0.take() }), process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Posts alerts as vmalert does (`POST /api/v2/alerts`): each with `labels`, `annotations`, and `startsAt` /
    /// `endsAt` (RFC 3339) where given.
    public func post(alerts: [[String: Any]]) async throws {
        let body = try JSONSerialization.data(withJSONObject: alerts)
        let reply = try await HTTP.send(
            "POST",
            HTTP.url(url, "/api/v2/alerts"),
            body: body,
            headers: ["Content-Type": "application/json"]
        )
        guard reply.status == 200 else { throw TestFailure(message: "posting alerts: \(reply.status) \(reply.text)") }
    }

    /// One alert it holds, and whether it is sent (`active`) or held back (`suppressed`, by an inhibition).
    public struct HeldAlert: Sendable {
        /// The alert's labels.
        public var labels: [String: String]
        /// `active`, `suppressed` or `unprocessed`.
        public var state: String
    }

    /// The alerts it holds now (`GET /api/v2/alerts`).
    public func alerts() async throws -> [HeldAlert] {
        let reply = try await HTTP.send("GET", HTTP.url(url, "/api/v2/alerts"))
        guard reply.status == 200, let alerts = try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]]
        else { throw TestFailure(message: "reading alerts: \(reply.status) \(reply.text)") }
        return alerts.map {
            HeldAlert(
                labels: $0["labels"] as? [String: String] ?? [:],
                state: ($0["status"] as? [String: Any])?["state"] as? String ?? ""
            )
        }
    }

    /// Runs `amtool` with `arguments` and returns its exit status and output.
    public static func amtool(_ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
        try await Child.run(try path(of: "amtool"), arguments)
    }
}

/// A webhook receiver for Alertmanager's `webhook_configs` on a free loopback port: it keeps every notification
/// it is sent, with the path it came to (the shipped configuration's `/apihealth/page` or `/apihealth/ticket`).
///
/// ```swift
/// let receiver = try await AlertWebhookReceiver.start()
/// let config = AlertmanagerProcess.config(shipped, webhook: receiver.url)
/// #expect(await waitUntil { receiver.notifications.contains { $0.status == "firing" } })
/// ```
public final class AlertWebhookReceiver: Sendable {
    /// One notification: a group of alerts as Alertmanager sends it.
    public struct Notification: Sendable {
        /// The path it was posted to.
        public var path: String
        /// `firing` or `resolved` (the group's).
        public var status: String
        /// The labels the group is made by (the route's `group_by`).
        public var groupLabels: [String: String]
        /// The labels every alert of the group shares.
        public var commonLabels: [String: String]
        /// Each alert: its `status`, labels and annotations.
        public var alerts: [(status: String, labels: [String: String], annotations: [String: String])]
        /// When it arrived.
        public var receivedAt: ContinuousClock.Instant
    }

    private let server: LoopbackHTTPServer
    /// Guards the notifications received so far.
    private let received: Locked<[Notification]>

    /// Its base URL, for ``AlertmanagerProcess/config(_:webhook:)``.
    public var url: URL { URL(string: server.baseURL)! }

    /// The notifications received so far, in order.
    public var notifications: [Notification] { received.withLock { $0 } }

    private init(server: LoopbackHTTPServer, received: Locked<[Notification]>) {
        self.server = server
        self.received = received
    }

    /// Starts a receiver on a free loopback port.
    public static func start() async throws -> AlertWebhookReceiver {
        let received = Locked<[Notification]>([])
        let server = try await LoopbackHTTPServer.start { request in
            if request.method == "POST", let notification = Self.notification(request) {
                received.withLock { $0.append(notification) }
            }
            return .text(200, "")
        }
        return AlertWebhookReceiver(server: server, received: received)
    }

    private static func notification(_ request: LoopbackHTTPServer.Request) -> Notification? {
        guard let root = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] else {
            return nil
        }
        let alerts = (root["alerts"] as? [[String: Any]] ?? []).map {
            (
                status: $0["status"] as? String ?? "",
                labels: $0["labels"] as? [String: String] ?? [:],
                annotations: $0["annotations"] as? [String: String] ?? [:]
            )
        }
        return Notification(
            path: request.path,
            status: root["status"] as? String ?? "",
            groupLabels: root["groupLabels"] as? [String: String] ?? [:],
            commonLabels: root["commonLabels"] as? [String: String] ?? [:],
            alerts: alerts,
            receivedAt: .now
        )
    }

    /// Stops listening.
    public func shutdown() async throws {
        try await server.shutdown()
    }
}
