@_spi(Package) import APIHealth
import APIHealthAsyncHTTPClient
import AsyncHTTPClient
import CoreMetrics
import Foundation
import Logging
import ServiceLifecycle

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct DemoResponse: Decodable {
    var id: Int
    var name: String
}

/// Counts what the demo did, for the progress line and the summary.
final class DemoCounters: Sendable {
    /// Guards the counts.
    private let counts = Locked((requests: 0, errors: 0, parseFailures: 0))

    func add(error: Bool, parseFailure: Bool) {
        counts.withLock { counts in
            counts.requests += 1
            if error { counts.errors += 1 }
            if parseFailure { counts.parseFailures += 1 }
        }
    }

    var snapshot: (requests: Int, errors: Int, parseFailures: Int) { counts.withLock { $0 } }
}

/// Calls the local API through instrumented sessions at a steady rate until the duration is over
/// (or graceful shutdown), decoding every answer through the agent. The `accounts` module calls it
/// through AsyncHTTPClient, the others through URLSession, so both kinds of capture show side by side.
struct DemoTraffic: Service {
    let agent: APIHealthAgent
    let baseURL: String
    let modules: [String]
    let rate: Double
    let duration: Duration
    let counters: DemoCounters
    let logger: Logger
    /// Whether AsyncHTTPClient retries a connection that could not be made until the request's timeout
    /// (its default); off, a refused connection fails the request at once, as URLSession's does.
    var retriesConnections = true

    func run() async throws {
        var sessions: [String: URLSession] = [:]
        for module in modules {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 5
            agent.instrument(configuration, module: module)
            sessions[module] = URLSession(configuration: configuration)
        }
        let sessionsByModule = sessions
        let endpoints = DemoAPI.endpoints.filter { modules.contains($0.module) }
        guard !endpoints.isEmpty else { return }
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool.retryConnectionEstablishment = retriesConnections
        let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let start = ContinuousClock.now
        let interval = Duration.seconds(1 / max(rate, 0.1))
        // A plain task group collected as it goes (`withDiscardingTaskGroup` needs macOS 14): at most
        // `maximumUncollected` calls are started and not yet collected, enough for the 5 s timeout at the rate.
        let maximumUncollected = rate.isFinite ? max(1_024, Int(min(rate, 1_000_000) * 6)) : 1_024
        await withTaskGroup(of: Void.self) { group in
            var index = 0
            var uncollected = 0
            while ContinuousClock.now - start < duration && !Task.isShuttingDownGracefully && !Task.isCancelled {
                let endpoint = endpoints[index % endpoints.count]
                let call = index
                if endpoint.module == Self.asyncHTTPClientModule {
                    group.addTask {
                        await self.measured(endpoint) { await self.call(endpoint, index: call, client: httpClient) }
                    }
                } else {
                    group.addTask {
                        await self.measured(endpoint) {
                            await self.call(endpoint, index: call, session: sessionsByModule[endpoint.module]!)
                        }
                    }
                }
                index += 1
                uncollected += 1
                while uncollected > maximumUncollected, await group.next() != nil { uncollected -= 1 }
                try? await Task.sleep(until: start + interval * index, clock: .continuous)
            }
        }
        // Every call has ended: the client's connections close before the local API's event loops stop.
        try? await httpClient.shutdown()
    }

    /// The module whose calls go through AsyncHTTPClient.
    static let asyncHTTPClientModule = "accounts"

    private func call(_ endpoint: DemoEndpoint, index: Int, client: HTTPClient) async {
        var request = HTTPClientRequest(url: baseURL + endpoint.makePath(index))
        request.method = .init(rawValue: endpoint.method)
        request.headers.add(name: "X-Request-Id", value: UUID().uuidString)
        do {
            let response = try await client.execute(
                request,
                timeout: .seconds(5),
                recordingTo: agent,
                module: endpoint.module
            )
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status.code < 400 else {
                counters.add(error: true, parseFailure: false)
                return
            }
            do {
                _ = try JSONDecoder().decode(DemoResponse.self, from: Data(body.readableBytesView))
                counters.add(error: false, parseFailure: false)
            } catch {
                if let url = URL(string: request.url) {
                    var failed = URLRequest(url: url)
                    failed.httpMethod = endpoint.method
                    let head = HTTPURLResponse(
                        url: url,
                        statusCode: Int(response.status.code),
                        httpVersion: nil,
                        headerFields: nil
                    )
                    agent.recordParseFailure(
                        for: failed,
                        response: head,
                        error: error,
                        module: endpoint.module,
                        data: Data(body.readableBytesView)
                    )
                }
                counters.add(error: false, parseFailure: true)
            }
        } catch {
            counters.add(error: true, parseFailure: false)
        }
    }

    /// Runs one call with the service's own swift-metrics around it, shipped by APIHealthMetricsFactory
    /// beside the request points.
    private func measured(_ endpoint: DemoEndpoint, _ call: () async -> Void) async {
        let dimensions = [("module", endpoint.module)]
        let inFlight = Meter(label: "demo_calls_in_flight", dimensions: dimensions)
        inFlight.increment()
        let started = ContinuousClock.now
        await call()
        inFlight.decrement()
        let elapsed = (ContinuousClock.now - started).components
        CoreMetrics.Timer(label: "demo_call_duration", dimensions: dimensions)
            .recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
        Counter(label: "demo_calls", dimensions: dimensions).increment()
    }

    private func call(_ endpoint: DemoEndpoint, index: Int, session: URLSession) async {
        var request = URLRequest(url: URL(string: baseURL + endpoint.makePath(index))!)
        request.httpMethod = endpoint.method
        if endpoint.method == "POST" { request.httpBody = Data(#"{"items":[1,2,3]}"#.utf8) }
        request.setValue(UUID().uuidString, forHTTPHeaderField: "X-Request-Id")
        do {
            let (data, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard status < 400 else {
                counters.add(error: true, parseFailure: false)
                return
            }
            do {
                _ = try agent.decode(
                    DemoResponse.self,
                    from: data,
                    for: request,
                    response: response,
                    module: endpoint.module
                )
                counters.add(error: false, parseFailure: false)
            } catch {
                counters.add(error: false, parseFailure: true)
            }
        } catch {
            counters.add(error: true, parseFailure: false)
        }
    }
}

/// Every country's traffic as one service, so the group stops when the traffic is over, not when the first
/// country's is (another country's ending then would be a service ending unasked).
struct DemoFleetTraffic: Service {
    let traffic: [DemoTraffic]

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for country in traffic { group.addTask { try await country.run() } }
            try await group.waitForAll()
        }
    }
}
