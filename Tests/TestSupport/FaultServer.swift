@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthTestKit
import Foundation
import LineProtocol

/// A small write endpoint that answers as a script says, for the failures real servers will not
/// produce on demand (429 with Retry-After, 413, 503, a hung socket). It decodes what it stores.
public final class FaultServer: Sendable {
    /// What the server does with the request numbered `index` (from 0) carrying `lines`. Called under
    /// the server's lock: it must not call back into the server.
    public typealias Script = @Sendable (_ index: Int, _ lines: [String]) -> LoopbackHTTPServer.Response

    private struct State {
        var requests: [[String]] = []
        var stored: [String] = []
        var headers: [[String: String]] = []
        var paths: [String] = []
    }

    private let state = Locked(State())
    public let server: LoopbackHTTPServer

    public static func start(script: @escaping Script) async throws -> FaultServer {
        try await start(script: script) { try await LoopbackHTTPServer.start(handler: $0) }
    }

    /// Starts on `port`, which refused connections until now (a destination that comes back up).
    public static func start(on port: RefusingPort, script: @escaping Script) async throws -> FaultServer {
        try await start(script: script) { try await port.startServer(handler: $0) }
    }

    private static func start(
        script: @escaping Script,
        server start: (@escaping LoopbackHTTPServer.Handler) async throws -> LoopbackHTTPServer
    ) async throws -> FaultServer {
        let box = Locked<FaultServer?>(nil)
        let server = try await start { request in
            guard let fault = box.withLock({ $0 }) else { return .text(503, "starting") }
            return fault.handle(request, script: script)
        }
        let fault = FaultServer(server: server)
        box.withLock { $0 = fault }
        return fault
    }

    private init(server: LoopbackHTTPServer) {
        self.server = server
    }

    public var url: URL { URL(string: server.baseURL)! }

    private func handle(_ request: LoopbackHTTPServer.Request, script: Script) -> LoopbackHTTPServer.Response {
        var body = request.body
        if request.header("Content-Encoding") == "gzip" {
            guard let decoded = try? Gzip.decompress(body) else { return .text(400, "bad gzip") }
            body = decoded
        }
        let lines = String(decoding: body, as: UTF8.self).split(separator: "\n").map(String.init)
        let headers = Dictionary(
            request.headers.map { ($0.name.lowercased(), $0.value) },
            uniquingKeysWith: { a, _ in a }
        )
        // One step under the lock: a test that sees the request counted also sees its lines stored.
        return state.withLock { state in
            let response = script(state.requests.count, lines)
            state.requests.append(lines)
            state.headers.append(headers)
            state.paths.append(request.uri)
            if case .hang = response.body { return response }
            if (200..<300).contains(response.status) { state.stored += lines }
            return response
        }
    }

    /// Every request's lines, in arrival order.
    public var requests: [[String]] { state.withLock { $0.requests } }
    /// The lines of requests answered with a 2xx.
    public var stored: [String] { state.withLock { $0.stored } }
    public var requestHeaders: [[String: String]] { state.withLock { $0.headers } }
    public var requestURIs: [String] { state.withLock { $0.paths } }

    /// Waits (real time) until `count` requests have arrived; returns whether they did.
    public func waitForRequests(_ count: Int, timeout: Duration = eventTimeout) async -> Bool {
        await waitUntil(timeout: timeout) { requests.count >= count }
    }

    public func shutdown() async {
        try? await server.shutdown()
    }
}
