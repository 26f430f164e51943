// The README's code as a service: every line of the README's Swift blocks (but its Package.swift) is
// here, and ReadmeTests fails when the two part ways. With API_URL (an API on loopback) and the
// settings `fromEnvironment` reads, it calls the API through URLSession and AsyncHTTPClient and counts
// with swift-metrics, prints `called`, and runs until SIGTERM, when its ServiceGroup stops the agent last.
import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthMetrics
import APIHealthTracing
import AsyncHTTPClient
import CoreMetrics
import Foundation
import Logging
import ServiceLifecycle

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Prints `text` as a line at once (stdout is a pipe when the test runs this).
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

struct Charge: Decodable {
    var id: String
}

/// The service's own work: its calls to the API, then waiting to be told to stop.
struct Server: Service {
    let agent: APIHealthAgent
    let payments: URLSession
    let httpClient: HTTPClient
    let api: String

    func run() async throws {
        for path in ["/charges/42", "/charges/43"] {
            do {
                say("charge \(try await charge(URLRequest(url: URL(string: api + path)!)).id)")
            } catch is DecodingError {
                say("not a charge")
            }
        }
        try await bill(HTTPClientRequest(url: api + "/invoices/7"))
        Counter(label: "checkout_orders").increment()
        say("called")
        try await gracefulShutdown()
        try await httpClient.shutdown()
    }

    func charge(_ request: URLRequest) async throws -> Charge {
        // Wherever the service calls out (Charge is your Decodable type):
        let (data, response) = try await payments.data(for: request)
        let charge = try agent.decode(Charge.self, from: data, for: request, response: response, module: "payments")
        return charge
    }

    // swift-format-ignore
    func bill(_ request: HTTPClientRequest) async throws {
        let response = try await httpClient.execute(request, timeout: .seconds(10), recordingTo: agent, module: "billing")
        let body = try await response.body.collect(upTo: 1 << 20)  // recorded at the body's end, or when dropped
        say("invoice \(body.readableBytes) bytes")
    }
}

/// The README's filter, success rules and trace links: compiled here, run by the tests of each.
// swift-format-ignore
func agentWithFilterAndTraceLinks(logger: Logger) throws -> APIHealthAgent {
    var settings = try APIHealthConfiguration.fromEnvironment(serviceName: "checkout")
    settings.capture.filter = { sample, request in request.value(forHTTPHeaderField: "X-Synthetic") == nil ? sample : nil }
    settings.capture.successRules = [.success(404, host: "api.example.com", path: "/users/{id}")]
    settings.capture.tracePropagation = .w3c(firstPartyHosts: ["api.example.com"])  // then addTraceHeaders(to:)
    let agent = try APIHealthAgent(configuration: settings, logger: logger)
    return agent
}

let api = ProcessInfo.processInfo.environment["API_URL"] ?? "http://127.0.0.1:8080"
let logger = Logger(label: "checkout")
let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "checkout"), logger: logger)
let configuration = URLSessionConfiguration.default
agent.instrument(configuration, module: "payments")  // after setting its other options
let payments = URLSession(configuration: configuration)
MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent))
let server = Server(
    agent: agent,
    payments: payments,
    httpClient: HTTPClient(eventLoopGroupProvider: .singleton),
    api: api
)

// `server` is your own Service (an HTTP server, a worker). The agent first: a ServiceGroup stops
// services in reverse order, so the agent stops last and sends what the others recorded.
let group = ServiceGroup(services: [agent, server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
try await group.run()
