import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import TestSupport
import Testing

/// A loopback GraphQL API called through AsyncHTTPClient: each operation is an endpoint, counted exactly
/// in a real VictoriaMetrics, whichever form the request's body takes.
@Suite(.serialized) struct AsyncHTTPClientGraphQLTests {
    @Test func operationsAreEndpointsCountedExactlyInVictoriaMetrics() async throws {
        let victoria = try VictoriaMetrics()
        let service = "ahc_graphql_\(UInt32.random(in: 0...UInt32.max))"
        let server = try await LoopbackHTTPServer.start(threads: 2) { request in
            guard request.path == "/graphql" else { return .text(404, "") }
            return .json(200, #"{"data":{"ok":true}}"#)
        }
        var configuration = APIHealthConfiguration(
            serviceName: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "o", bucket: "b"))
        )
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
        agent.start()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let endpoint = server.baseURL + "/graphql"

        func run(_ request: HTTPClientRequest) async throws -> UInt {
            let response = try await client.execute(request, timeout: .seconds(60), recordingTo: agent, module: "app")
            _ = try await response.body.collect(upTo: 1 << 20)
            return response.status.code
        }
        func post(_ body: HTTPClientRequest.Body) -> HTTPClientRequest {
            var request = HTTPClientRequest(url: endpoint)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = body
            return request
        }
        // A body of a ByteBuffer, of bytes, and of Data (a collection): each read for its name.
        let getUser = #"{"query":"query GetUser { me { name } }","operationName":"GetUser"}"#
        #expect(try await run(post(.bytes(ByteBuffer(string: getUser)))) == 200)
        #expect(try await run(post(.bytes(Array(getUser.utf8)))) == 200)
        #expect(try await run(post(.bytes(Data(getUser.utf8)))) == 200)
        for page in 0..<2 {
            let get = HTTPClientRequest(
                url: endpoint + "?query=query%20ListOrders%20%7B%20orders%20%7D&operationName=ListOrders&p=\(page)"
            )
            #expect(try await run(get) == 200)
        }
        let persisted = #"{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"\#(GraphQLHash.value)"}}}"#
        for _ in 0..<4 { #expect(try await run(post(.bytes(ByteBuffer(string: persisted)))) == 200) }
        // A body streamed from an async sequence cannot be read without consuming it.
        let stream = AsyncStream<ByteBuffer> { continuation in
            continuation.yield(ByteBuffer(string: getUser))
            continuation.finish()
        }
        #expect(try await run(post(.stream(stream, length: .known(Int64(getUser.utf8.count))))) == 200)
        #expect(try await run(HTTPClientRequest(url: server.baseURL + "/users/42")) == 404)

        await agent.shutdown(deadline: .seconds(60))
        #expect(agent.metrics.pendingLines == 0)
        try await client.shutdown()
        try await server.shutdown()
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
            return counted.values.reduce(0, +) >= 11
        }
        #expect(
            counted == [
                "POST /graphql/GetUser": 3, "GET /graphql/ListOrders": 2, "POST /graphql/{sha256:9c16f6e0}": 4,
                "POST /graphql/{unknown}": 1, "GET /users/{id}": 1,
            ],
            "\(counted)"
        )
    }
}

/// A persisted query's hash, as a client would send it.
enum GraphQLHash {
    static let value = "9c16f6e0b2e4e0a8c7e3f1d2b5a4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f"
}
