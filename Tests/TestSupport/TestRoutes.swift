@_spi(Package) import APIHealth
import APIHealthTestKit
import Foundation

/// The endpoints the capture tests call, on a real loopback HTTP server.
public enum TestRoutes {
    public static func handle(_ request: LoopbackHTTPServer.Request) async -> LoopbackHTTPServer.Response {
        let parts = request.path.split(separator: "/").map(String.init)
        switch parts.first {
        case "ok":
            return .json(200, #"{"ok":true}"#, headers: [("X-Request-Id", "resp-123"), ("X-Custom", "kept")])
        case "status":
            let code = Int(parts.last ?? "") ?? 500
            return .text(code, "status \(code)", headers: [("X-Status", "\(code)")])
        case "redirect":
            // `?delay=N`: every hop (and the last answer) N ms after its request arrives.
            let remaining = Int(parts.last ?? "") ?? 0
            let delay = Int(request.query["delay"] ?? "") ?? 0
            let next = "/redirect/\(remaining - 1)" + (delay > 0 ? "?delay=\(delay)" : "")
            var response: LoopbackHTTPServer.Response =
                remaining == 0 ? .text(200, "arrived") : .text(302, "", headers: [("Location", next)])
            response.delay = .milliseconds(delay)
            return response
        case "hang":
            return LoopbackHTTPServer.Response(status: 200, body: .hang)
        case "slow":
            return LoopbackHTTPServer.Response(status: 200, body: .bytes(Array("late".utf8)), delay: .seconds(3))
        case "bytes":
            let count = Int(parts.last ?? "") ?? 0
            return LoopbackHTTPServer.Response(status: 200, body: .generated(totalBytes: count, chunkSize: 64 * 1_024))
        case "stalled":
            // The head announces the whole body; 64 KiB of it come, then nothing until the client leaves.
            let count = Int(parts.last ?? "") ?? 0
            return LoopbackHTTPServer.Response(status: 200, body: .stalled(totalBytes: count, sentBytes: 64 * 1_024))
        case "headers":
            // Echoes the request's X-Token and Authorization headers, to see what went out.
            let token = request.header("X-Token") ?? "-"
            let authorization = request.header("Authorization") ?? "-"
            return .text(200, "\(token) \(authorization)")
        case "basic-auth":
            // 401 with a Basic challenge until the request carries user:secret; `/basic-auth/N`
            // answers each N ms after it arrives.
            var response: LoopbackHTTPServer.Response =
                request.header("Authorization") == "Basic dXNlcjpzZWNyZXQ="
                ? .text(200, "welcome")
                : .text(401, "who are you", headers: [("WWW-Authenticate", #"Basic realm="tests""#)])
            response.delay = .milliseconds(parts.count > 1 ? Int(parts[1]) ?? 0 : 0)
            return response
        case "timed":
            // 200 ms before the head, 300 ms between the head and the body.
            return LoopbackHTTPServer.Response(
                status: 200,
                body: .bytes(Array("timed".utf8)),
                delay: .milliseconds(200),
                bodyDelay: .milliseconds(300)
            )
        case "echo":
            return LoopbackHTTPServer.Response(
                status: 200,
                headers: [("X-Received-Bytes", "\(request.body.count)")],
                body: .bytes(request.body)
            )
        case "json":
            switch parts.last {
            case "user": return .json(200, #"{"id":7,"name":"Ada"}"#)
            case "missing": return .json(200, #"{"id":7}"#)
            case "mismatch": return .json(200, #"{"id":"seven","name":"Ada"}"#)
            case "null": return .json(200, #"{"id":null,"name":"Ada"}"#)
            case "cut": return .json(200, #"{"id":7,"name":"Ad"#)
            default: return .text(200, "<html>not json</html>")
            }
        default:
            return .text(404, "no route \(request.path)")
        }
    }
}

/// Resident memory of this process, from /proc.
public func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return (Int(fields.count > 1 ? fields[1] : "0") ?? 0) * 4_096
}

/// A fresh, empty temporary directory.
public func temporaryDirectory(_ prefix: String = "apihealth") -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Polls `read` until it returns at least `count` values (recording happens as requests complete), for
/// at most ``eventTimeout``; returns what it read last.
public func waitForValues<Value>(_ count: Int, _ read: () -> [Value]) async throws -> [Value] {
    _ = await waitUntil { read().count >= count }
    return read()
}

/// The paths a server was asked for, in order of arrival, so that a test can act once a request is
/// under way (an event) instead of after a guessed time.
///
/// ```swift
/// let arrivals = Arrivals()
/// let server = try await LoopbackHTTPServer.start(handler: arrivals.noting(TestRoutes.handle))
/// ```
public final class Arrivals: Sendable {
    private let paths = Locked([String]())

    public init() {}

    /// `handler`, noting each request's path as it arrives.
    public func noting(_ handler: @escaping LoopbackHTTPServer.Handler) -> LoopbackHTTPServer.Handler {
        { request in
            self.paths.withLock { $0.append(request.path) }
            return await handler(request)
        }
    }

    /// Waits until a request for `path` has arrived; returns whether one did within `timeout`.
    public func wait(for path: String, timeout: Duration = eventTimeout) async -> Bool {
        await waitUntil(timeout: timeout) { paths.withLock { $0.contains(path) } }
    }
}
