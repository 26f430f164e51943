@_spi(Package) import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthMetrics
import APIHealthTestKit
import AsyncHTTPClient
import CoreMetrics
import Foundation
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The `service` modes: a service as a team runs one, in this process. An HTTP server (the service)
/// answers four routes by calling an upstream API, two through URLSession and two through
/// AsyncHTTPClient, decodes what the upstream sends, and counts and times each of its requests with
/// swift-metrics, as a web framework's metrics middleware does. A blocking socket client on the main
/// thread sends it COUNT requests, one at a time, on one keep-alive connection (the least a client
/// can cost, so the count is the service's).
///
/// - `service`: no agent (plain clients, swift-metrics not bootstrapped).
/// - `service-none`, `service-errors-and-slow`, `service-all`: the agent on, as a service runs it, with
///   that raw mode: its spool on disk, interval points, swift-metrics through `APIHealthMetricsFactory`,
///   batches posted to the VictoriaMetrics at APIHEALTH_PROBE_VICTORIA_URL. `service-default` leaves
///   the raw mode at its default.
/// - `service-idle`: the agent on with no request, for COUNT milliseconds: its periodic work.
///
/// The agent's periodic work (write-through rounds, interval and health points, metrics flushes,
/// batch deadlines) runs on real time, and a request under callgrind takes about fifty times as long
/// as natively: counted per request, that work would grow with how slowly the run goes. So the
/// request modes stretch every period to an hour, and the work is driven by the requests alone (the
/// capture queue drained every 512 samples, a batch sealed at 5,000 lines, the rest at shutdown);
/// `service-idle` counts the periodic work per second, at the periods a service runs with.
///
/// The agent is shut down before the process ends, so every line recorded is gzipped and posted
/// within the count; the run fails (exit 2) unless every upstream request was captured, and every
/// line written.
enum ServiceProbe {
    static let modes = [
        "service", "service-none", "service-errors-and-slow", "service-all", "service-default", "service-idle",
    ]

    /// What the upstream answers every route with.
    static let upstreamBody =
        #"{"id":8271,"status":"paid","total":129.5,"currency":"EUR","items":[{"sku":"A-1","quantity":2},"#
        + #"{"sku":"B-7","quantity":1}]}"#

    struct Order: Codable, Sendable {
        struct Item: Codable, Sendable {
            var sku: String
            var quantity: Int
        }
        var id: Int
        var status: String
        var total: Double
        var currency: String
        var items: [Item]
    }

    /// The service's routes: the upstream path each calls (the id varies per request) and its client.
    static let routes: [(prefix: String, upstream: String, throughURLSession: Bool)] = [
        ("/users/", "/v1/users/", true),
        ("/orders/", "/v1/orders/", true),
        ("/products/", "/v1/catalog/products/", false),
        ("/carts/", "/v1/carts/", false),
    ]

    static func run(mode: String, count: Int) -> Never {
        let rawPoints: RawPoints?? =
            switch mode {
            case "service": nil
            case "service-none": .some(RawPoints.none)
            case "service-errors-and-slow": .some(.errorsAndSlow)
            case "service-all": .some(.all)
            case "service-idle": .some(RawPoints.none)
            default: .some(nil)
            }
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("capture-probe-\(UUID().uuidString)")
        let periodic = mode == "service-idle"
        let agent = rawPoints.map { makeAgent(rawPoints: $0, spool: spool, mode: mode, periodic: periodic) }
        if let agent {
            var metrics = APIHealthMetricsFactory.Configuration()
            if !periodic { metrics.interval = .seconds(3_600) }
            MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent, configuration: metrics))
            agent.start()
        }
        if periodic {
            Thread.sleep(forTimeInterval: Double(count) / 1_000)
            let done = DispatchSemaphore(value: 0)
            Task.detached {
                await agent?.shutdown(deadline: .seconds(120))
                done.signal()
            }
            done.wait()
            print("capture-probe: \(mode) \(count) ms")
            try? FileManager.default.removeItem(at: spool)
            exit(0)
        }
        let servers = startServers(agent: agent)
        guard sendRequests(count, port: servers.service.port) else { fail("the client failed", code: 1) }
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do {
                try await servers.service.shutdown()
                try await servers.stopClients()
                try await servers.upstream.shutdown()
            } catch {
                fail("\(error)", code: 1)
            }
            await agent?.shutdown(deadline: .seconds(120))
            done.signal()
        }
        done.wait()
        if let agent { check(agent, count: count) }
        print("capture-probe: \(mode) \(count) requests")
        try? FileManager.default.removeItem(at: spool)
        exit(0)
    }

    /// The agent as a service runs it: spool on disk, shipping to the probe's VictoriaMetrics; the
    /// raw mode `rawPoints`, or the default when `nil`; without `periodic`, every period an hour.
    private static func makeAgent(rawPoints: RawPoints?, spool: URL, mode: String, periodic: Bool) -> APIHealthAgent {
        guard
            let victoria = ProcessInfo.processInfo.environment["APIHEALTH_PROBE_VICTORIA_URL"]
                .flatMap(URL.init(string:))
        else {
            fail("\(mode) needs APIHEALTH_PROBE_VICTORIA_URL", code: 64)
        }
        var configuration = APIHealthConfiguration(serviceName: "capture-probe")
        configuration.spool = SpoolOptions(directory: spool)
        configuration.destination = InfluxDestination(url: victoria, api: .v2(organization: "o", bucket: "b"))
        if let rawPoints { configuration.capture.rawPoints = rawPoints }
        if !periodic {
            let hour = Duration.seconds(3_600)
            configuration.spool?.writeThroughInterval = hour
            configuration.aggregation?.interval = hour
            configuration.selfMetricsInterval = hour
            configuration.batching.flushDelay = hour
            configuration.batching.maximumAge = hour
        }
        do {
            return try APIHealthAgent(configuration: configuration, logger: Logger(label: "capture-probe"))
        } catch {
            fail("\(error)", code: 3)
        }
    }

    /// Fails the run unless every upstream request was captured and every line written.
    private static func check(_ agent: APIHealthAgent, count: Int) {
        let metrics = agent.metrics
        let requests = UInt64(count)
        let written = metrics.pointsWritten
        let onlyAggregated = metrics.requestsOnlyAggregated
        guard metrics.pendingLines == 0, metrics.pointsDropped == 0, metrics.requestsUncaptured == 0,
            onlyAggregated <= requests, written >= requests - onlyAggregated,
            agent.configuration.capture.rawPoints != .all || onlyAggregated == 0,
            agent.configuration.capture.rawPoints != .none || onlyAggregated == requests
        else {
            fail(
                "\(count) requests: \(written) points written, \(onlyAggregated) only aggregated, "
                    + "\(metrics.pendingLines) pending, \(metrics.pointsDropped) dropped",
                code: 2
            )
        }
    }

    struct Servers: Sendable {
        let upstream: LoopbackHTTPServer
        let service: LoopbackHTTPServer
        let session: URLSession
        let client: HTTPClient

        func stopClients() async throws {
            session.finishTasksAndInvalidate()
            try await client.shutdown()
        }
    }

    private static func startServers(agent: APIHealthAgent?) -> Servers {
        let started = DispatchSemaphore(value: 0)
        let servers = Locked<Servers?>(nil)
        Task.detached {
            do {
                let upstream = try await LoopbackHTTPServer.start(threads: 1) { _ in .json(200, upstreamBody) }
                let sessionConfiguration = URLSessionConfiguration.default
                agent?.instrument(sessionConfiguration, module: "accounts")
                let session = URLSession(configuration: sessionConfiguration)
                let client = HTTPClient(eventLoopGroupProvider: .singleton)
                let base = upstream.baseURL
                let service = try await LoopbackHTTPServer.start(threads: 1) { request in
                    await answer(request, upstream: base, session: session, client: client, agent: agent)
                }
                servers.withLock {
                    $0 = Servers(upstream: upstream, service: service, session: session, client: client)
                }
            } catch {
                fail("\(error)", code: 1)
            }
            started.signal()
        }
        started.wait()
        return servers.withLock { $0! }
    }

    /// One request to the service: the upstream called, its answer decoded and re-encoded, the
    /// request counted and timed.
    private static func answer(
        _ request: LoopbackHTTPServer.Request,
        upstream: String,
        session: URLSession,
        client: HTTPClient,
        agent: APIHealthAgent?
    ) async -> LoopbackHTTPServer.Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let path = request.path
        guard let route = routes.firstIndex(where: { path.hasPrefix($0.prefix) }) else { return .text(404, "") }
        let id = path.dropFirst(routes[route].prefix.count)
        let url = upstream + routes[route].upstream + id
        let order: Order
        do {
            if routes[route].throughURLSession {
                let upstreamRequest = URLRequest(url: URL(string: url)!)
                let (data, response) = try await session.data(for: upstreamRequest)
                order =
                    try agent?.decode(
                        Order.self,
                        from: data,
                        for: upstreamRequest,
                        response: response,
                        module: "accounts"
                    )
                    ?? JSONDecoder().decode(Order.self, from: data)
            } else {
                let upstreamRequest = HTTPClientRequest(url: url)
                let response =
                    if let agent {
                        try await client.execute(
                            upstreamRequest,
                            timeout: .seconds(10),
                            recordingTo: agent,
                            module: "catalog"
                        )
                    } else {
                        try await client.execute(upstreamRequest, timeout: .seconds(10))
                    }
                let body = try await response.body.collect(upTo: 1 << 20)
                order =
                    try agent?.decode(
                        Order.self,
                        from: body,
                        for: upstreamRequest,
                        response: response,
                        module: "catalog"
                    )
                    ?? JSONDecoder().decode(Order.self, from: Data(body.readableBytesView))
            }
        } catch {
            return .text(502, "")
        }
        let encoded = (try? JSONEncoder().encode(order)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        let dimensions = [("route", routes[route].prefix), ("method", request.method)]
        Counter(label: "http_requests", dimensions: dimensions).increment()
        CoreMetrics.Timer(label: "http_request_duration", dimensions: dimensions)
            .recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
        return .json(200, encoded)
    }

    /// Sends `count` GETs to the service, one at a time on one connection, cycling through the routes,
    /// each with an id of its own (as users, orders and products are: most URLs a service calls are
    /// new to it); `false` when one fails.
    private static func sendRequests(_ count: Int, port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return false }
        var noDelay: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        for index in 0..<count {
            let request = Array(
                "GET \(routes[index % routes.count].prefix)\(100_000 + index) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8
            )
            guard request.withUnsafeBytes({ send(socket, $0.baseAddress, $0.count, 0) }) == request.count,
                readResponse(socket, into: &buffer)
            else { return false }
        }
        return true
    }

    /// Reads one response with a `content-length` and a 200 status.
    private static func readResponse(_ socket: Int32, into buffer: inout [UInt8]) -> Bool {
        var filled = 0
        var headEnd: Int?
        var total: Int?
        while total.map({ filled < $0 }) ?? true {
            let read = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress! + filled, $0.count - filled, 0) }
            guard read > 0 else { return false }
            filled += read
            if headEnd == nil, let end = find([13, 10, 13, 10], in: buffer[..<filled]) {
                headEnd = end + 4
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                guard head.hasPrefix("http/1.1 200"),
                    let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                else { return false }
                total = end + 4 + length
            }
        }
        return filled == total
    }

    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index <= haystack.endIndex - needle.count {
            if haystack[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    private static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("capture-probe: \(message)\n".utf8))
        exit(code)
    }
}
