import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 server on a loopback port, answering from an async handler: in a test, the API an
/// instrumented client calls, or the write endpoint an agent ships to (including the faults real servers
/// will not produce on demand). The `APIHealthTestKit` product; the demo's API is one too.
///
/// ```swift
/// let server = try await LoopbackHTTPServer.start { request in
///     request.path == "/health" ? .text(200, "ok") : .text(404, "no such endpoint")
/// }
/// defer { Task { try await server.shutdown() } }
/// ```
public final class LoopbackHTTPServer: Sendable {
    /// One request, with its whole body.
    public struct Request: Sendable {
        /// The HTTP method.
        public var method: String
        /// The request target, with its query.
        public var uri: String
        /// The headers, in the order received.
        public var headers: [(name: String, value: String)]
        /// The body as received (a gzipped body is not unpacked).
        public var body: [UInt8]

        /// The target without its query.
        public var path: String { String(uri.prefix { $0 != "?" }) }

        /// The query parameters, percent-decoded.
        public var query: [String: String] {
            guard let mark = uri.firstIndex(of: "?") else { return [:] }
            var result: [String: String] = [:]
            for pair in uri[uri.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                let value =
                    parts.count > 1
                    ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
                result[name] = value
            }
            return result
        }

        /// The first header of a name.
        ///
        /// - Parameter name: The header's name (case-insensitive).
        /// - Returns: Its value, or `nil` when the request has none.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// What to send back.
    public struct Response: Sendable {
        /// The body to send.
        public enum Body: Sendable {
            /// These bytes, with a `Content-Length`.
            case bytes([UInt8])
            /// `totalBytes` bytes in chunks of `chunkSize`, generated as they are sent.
            case generated(totalBytes: Int, chunkSize: Int)
            /// Never answer: the connection hangs until the client gives up.
            case hang
            /// The head announces `totalBytes`, `sentBytes` of them follow, and then nothing: the
            /// connection is held open, mid-body, until the client closes it (a body a client cancels
            /// while it is still arriving, whatever the machine's speed).
            case stalled(totalBytes: Int, sentBytes: Int)
            /// These parts, each flushed on its own, with `Transfer-Encoding: chunked` and no `Content-Length`.
            case chunked([[UInt8]])
        }

        /// The status code.
        public var status: Int
        /// Headers to send (`Content-Length` is added for a body of known size).
        public var headers: [(String, String)]
        /// The body.
        public var body: Body
        /// Wait this long before answering.
        public var delay: Duration
        /// Wait this long between the response head and its body.
        public var bodyDelay: Duration

        /// A response.
        ///
        /// - Parameters:
        ///   - status: The status code.
        ///   - headers: Headers to send.
        ///   - body: The body.
        ///   - delay: How long to wait before answering.
        ///   - bodyDelay: How long to wait between the response head and its body.
        public init(
            status: Int,
            headers: [(String, String)] = [],
            body: Body = .bytes([]),
            delay: Duration = .zero,
            bodyDelay: Duration = .zero
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
            self.bodyDelay = bodyDelay
        }

        /// A `text/plain` response.
        ///
        /// - Parameters:
        ///   - status: The status code.
        ///   - text: The body.
        ///   - headers: More headers to send.
        /// - Returns: The response.
        public static func text(_ status: Int, _ text: String, headers: [(String, String)] = []) -> Response {
            Response(
                status: status,
                headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
                body: .bytes(Array(text.utf8))
            )
        }

        /// An `application/json` response.
        ///
        /// - Parameters:
        ///   - status: The status code.
        ///   - json: The body.
        ///   - headers: More headers to send.
        /// - Returns: The response.
        public static func json(_ status: Int, _ json: String, headers: [(String, String)] = []) -> Response {
            Response(
                status: status,
                headers: [("Content-Type", "application/json")] + headers,
                body: .bytes(Array(json.utf8))
            )
        }
    }

    /// Answers one request; called for each, concurrently.
    public typealias Handler = @Sendable (Request) async -> Response

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// The connections and responses under way, which must end before the event loops stop.
    private let work: ServerWork
    /// The port the server listens on.
    public let port: Int

    /// `http://127.0.0.1:<port>`
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, work: ServerWork) {
        self.group = group
        self.channel = channel
        self.work = work
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts listening on `127.0.0.1:port` (0: a free port).
    ///
    /// - Parameters:
    ///   - port: The port to listen on; 0 picks a free one (see ``port``).
    ///   - threads: Event loop threads.
    ///   - handler: Answers each request.
    /// - Returns: The server, listening.
    /// - Throws: When the port cannot be bound.
    public static func start(
        port: Int = 0,
        threads: Int = 1,
        handler: @escaping Handler
    ) async throws -> LoopbackHTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let work = ServerWork()
        do {
            let channel = try await bootstrap(group, work, handler).bind(host: "127.0.0.1", port: port).get()
            return LoopbackHTTPServer(group: group, channel: channel, work: work)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Starts listening on `socket`, a TCP socket already bound to a loopback address but not yet
    /// listening (so that, until now, connections to its port were refused and no other process could
    /// take the port). The server owns the socket from then on, and closes it even if starting fails.
    package static func start(
        boundSocket socket: CInt,
        threads: Int = 1,
        handler: @escaping Handler
    ) async throws -> LoopbackHTTPServer {
        guard listen(socket, 1_024) == 0 else {
            let error = IOError(errnoCode: errno, reason: "listen")
            close(socket)
            throw error
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let work = ServerWork()
        do {
            let channel = try await bootstrap(group, work, handler).withBoundSocket(socket).get()
            return LoopbackHTTPServer(group: group, channel: channel, work: work)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func bootstrap(
        _ group: any EventLoopGroup,
        _ work: ServerWork,
        _ handler: @escaping Handler
    ) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1_024)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                work.adopt(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(handler: handler, work: work))
                }
            }
    }

    /// Stops listening, closes the connections, waits for the responses under way (their waits are
    /// cancelled; a handler still runs to its end), then stops the event loops: nothing is scheduled on
    /// a loop after it has stopped.
    ///
    /// - Throws: When the event loops fail to stop.
    public func shutdown() async throws {
        try? await channel.close().get()
        await work.finish()
        try await group.shutdownGracefully()
    }
}

private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let handler: LoopbackHTTPServer.Handler
    private let work: ServerWork
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(handler: @escaping LoopbackHTTPServer.Handler, work: ServerWork) {
        self.handler = handler
        self.work = work
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            let request = LoopbackHTTPServer.Request(
                method: head.method.rawValue,
                uri: head.uri,
                headers: head.headers.map { ($0.name, $0.value) },
                body: body
            )
            let keepAlive = head.isKeepAlive
            let version = head.version
            let channel = context.channel
            let handler = self.handler
            self.head = nil
            body = []
            let started = work.start {
                let response = await handler(request)
                await sendResponse(response, on: channel, version: version, keepAlive: keepAlive)
            }
            if !started { context.close(promise: nil) }
        }
    }
}

/// The server's connections and response tasks, so shutdown can end them before the event loops stop.
private final class ServerWork: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var responses: [Int: Task<Void, Never>] = [:]
        var nextResponse = 0
        var isFinishing = false
    }

    /// Guards the open connections, the responses under way and whether shutdown has begun.
    private let state = NIOLockedValueBox(State())

    /// Keeps `channel` until it closes; one accepted once shutdown has begun is closed at once.
    func adopt(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let accepted = state.withLockedValue { state -> Bool in
            guard !state.isFinishing else { return false }
            state.channels[id] = channel
            return true
        }
        guard accepted else {
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLockedValue { $0.channels.removeValue(forKey: id) }
        }
    }

    /// Runs `body` as a response task, unless shutdown has begun (returns `false` then).
    func start(_ body: @escaping @Sendable () async -> Void) -> Bool {
        state.withLockedValue { state -> Bool in
            guard !state.isFinishing else { return false }
            let number = state.nextResponse
            state.nextResponse += 1
            state.responses[number] = Task { [self] in
                await body()
                _ = self.state.withLockedValue { $0.responses.removeValue(forKey: number) }
            }
            return true
        }
    }

    /// Closes every connection and waits for every response task to end.
    func finish() async {
        let (channels, responses) = state.withLockedValue { state in
            state.isFinishing = true
            return (Array(state.channels.values), Array(state.responses.values))
        }
        for response in responses { response.cancel() }
        for channel in channels { try? await channel.close().get() }
        for response in responses { await response.value }
    }
}

private func sendResponse(
    _ response: LoopbackHTTPServer.Response,
    on channel: any Channel,
    version: HTTPVersion,
    keepAlive: Bool
) async {
    if response.delay > .zero { try? await Task.sleep(for: response.delay) }
    var headers = HTTPHeaders(response.headers)
    let length: Int?
    switch response.body {
    case .hang: return
    case .bytes(let bytes): length = bytes.count
    case .generated(let total, _): length = total
    case .stalled(let total, _): length = total
    case .chunked: length = nil
    }
    if let length {
        headers.replaceOrAdd(name: "Content-Length", value: "\(length)")
    } else {
        headers.remove(name: "Content-Length")
        headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
    }
    if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
    let head = HTTPResponseHead(
        version: version,
        status: HTTPResponseStatus(statusCode: response.status),
        headers: headers
    )
    do {
        try await channel.writeAndFlush(HTTPServerResponsePart.head(head)).get()
        if response.bodyDelay > .zero { try? await Task.sleep(for: response.bodyDelay) }
        switch response.body {
        case .hang: return
        case .bytes(let bytes):
            if !bytes.isEmpty {
                try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: bytes))))
                    .get()
            }
        case .generated(let total, let chunkSize):
            var sent = 0
            var chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: chunkSize)
            while sent < total {
                let size = min(chunkSize, total - sent)
                if size < chunkSize { chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: size) }
                try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(chunk))).get()
                sent += size
            }
        case .stalled(let total, let sent):
            let part = ByteBuffer(repeating: UInt8(ascii: "x"), count: min(sent, total))
            try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(part))).get()
            // The rest never comes: hold the connection until the client closes it.
            try await channel.closeFuture.get()
            return
        case .chunked(let parts):
            for part in parts where !part.isEmpty {
                try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: part)))).get()
            }
        }
        try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
        if !keepAlive { try await channel.close().get() }
    } catch {
        try? await channel.close().get()
    }
}
