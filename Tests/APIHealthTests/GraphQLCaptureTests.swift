import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A loopback GraphQL API called through an instrumented URLSession: each operation is an endpoint,
/// counted exactly in a real VictoriaMetrics.
@Suite(.serialized) struct GraphQLCaptureTests {
    /// A GraphQL server on `/graphql` (POST and GET); anything else is 404.
    static func graphQLServer() async throws -> LoopbackHTTPServer {
        try await LoopbackHTTPServer.start(threads: 2) { request in
            guard request.path == "/graphql" else { return .text(404, "") }
            return .json(200, #"{"data":{"ok":true}}"#)
        }
    }

    /// A persisted query's hash (sha256 of `{ me { id } }`, as a client would send it).
    static let persistedHash = "9c16f6e0b2e4e0a8c7e3f1d2b5a4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f"

    @Test func urlSessionOperationsAreEndpointsCountedExactlyInVictoriaMetrics() async throws {
        let victoria = try VictoriaMetrics()
        let service = "graphql_\(UInt32.random(in: 0...UInt32.max))"
        let server = try await Self.graphQLServer()
        var configuration = APIHealthConfiguration(
            serviceName: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "o", bucket: "b"))
        )
        configuration.spool = nil
        configuration.batching.flushDelay = .milliseconds(50)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = 60
        agent.instrument(sessionConfiguration, module: "app")
        let session = URLSession(configuration: sessionConfiguration)
        let endpoint = URL(string: server.baseURL + "/graphql")!

        func post(_ body: String) async throws -> Int {
            var request = URLRequest(url: endpoint)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
            let (_, response) = try await session.data(for: request)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        func get(_ query: String) async throws -> Int {
            let (_, response) = try await session.data(from: URL(string: endpoint.absoluteString + "?" + query)!)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        for id in 0..<3 {
            let body =
                #"{"query":"query GetUser($id: ID!) { user(id: $id) { name } }","operationName":"GetUser","variables":{"id":"\#(id)"}}"#
            #expect(try await post(body) == 200)
        }
        for page in 0..<2 {
            #expect(
                try await get("query=query%20ListOrders%20%7B%20orders%20%7D&operationName=ListOrders&page=\(page)")
                    == 200
            )
        }
        let persisted = #"{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"\#(Self.persistedHash)"}}}"#
        for _ in 0..<4 { #expect(try await post(persisted) == 200) }
        #expect(try await post(#"{"query":"{ me { id } }"}"#) == 200)
        let (_, notGraphQL) = try await session.data(from: URL(string: server.baseURL + "/users/42")!)
        #expect((notGraphQL as? HTTPURLResponse)?.statusCode == 404)

        // Shutting down writes the interval points of the interval under way, and sends them.
        await agent.shutdown(deadline: .seconds(60))
        #expect(agent.metrics.pendingLines == 0)
        try await server.shutdown()
        let counted = try await Self.countsPerEndpoint(victoria, service: service, total: 11)
        #expect(
            counted == [
                "POST /graphql/GetUser": 3, "GET /graphql/ListOrders": 2, "POST /graphql/{sha256:9c16f6e0}": 4,
                "POST /graphql/{anonymous}": 1, "GET /users/{id}": 1,
            ],
            "\(counted)"
        )
    }

    /// Requests per `method path` of `service`, summed over its interval points in VictoriaMetrics, once
    /// `total` have arrived.
    static func countsPerEndpoint(
        _ victoria: VictoriaMetrics,
        service: String,
        total: Int
    ) async throws -> [String: Int] {
        var counted: [String: Int] = [:]
        _ = try await waitUntil {
            let samples = try await victoria.query(
                #"sum by (path, method) (sum_over_time(apihealth_request_interval_count{service="\#(service)"}[1d]))"#,
                at: Date().timeIntervalSince1970
            )
            counted = Dictionary(
                samples.map { ("\($0.labels["method"] ?? "-") \($0.labels["path"] ?? "-")", Int($0.value)) },
                uniquingKeysWith: +
            )
            return counted.values.reduce(0, +) >= total
        }
        return counted
    }
}
