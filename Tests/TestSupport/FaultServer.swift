@_spi(Benchmarking) import APIHealth
import APIHealthTestKit
import Foundation
import LineProtocol

/// A small write endpoint that answers as a script says, for the failures real servers will not
/// produce on demand (429 with Retry-After, 413, 503, a hung socket). It decodes what it stores.
public final class FaultServer: Sendable {
    /// What the server does with the request numbered `index` (from 0) carrying `lines`.
    public typealias Script = @Sendable (_ index: Int, _ lines: [String]) -> LoopbackHTTPServer.Response

    private struct State {
        var requests: [[String]] = []
        var stored: [String] = []
        var headers: [[String: String]] = []
        var paths: [String] = []
    }

    private let state = Locked(State())
    public let server: LoopbackHTTPServer

    public static func start(port: Int = 0, script: @escaping Script) async throws -> FaultServer {
        let box = Locked<FaultServer?>(nil)
        let server = try await LoopbackHTTPServer.start(port: port) { request in
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
        let index = state.withLock { state -> Int in
            state.requests.append(lines)
            state.headers.append(Dictionary(request.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a }))
            state.paths.append(request.uri)
            return state.requests.count - 1
        }
        let response = script(index, lines)
        if case .hang = response.body {
            return response
        }
        if (200..<300).contains(response.status) {
            state.withLock { $0.stored += lines }
        }
        return response
    }

    /// Every request's lines, in arrival order.
    public var requests: [[String]] { state.withLock { $0.requests } }
    /// The lines of requests answered with a 2xx.
    public var stored: [String] { state.withLock { $0.stored } }
    public var requestHeaders: [[String: String]] { state.withLock { $0.headers } }
    public var requestURIs: [String] { state.withLock { $0.paths } }

    /// Waits (real time) until `count` requests have arrived; returns whether they did.
    public func waitForRequests(_ count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if requests.count >= count { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return requests.count >= count
    }

    public func shutdown() async {
        try? await server.shutdown()
    }
}
