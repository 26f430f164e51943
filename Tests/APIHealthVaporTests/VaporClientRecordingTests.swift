@_spi(Package) import APIHealth
import APIHealthTestKit
import APIHealthVapor
import Foundation
import Logging
import TestSupport
import Testing
import Vapor

/// A real Vapor application on a loopback port, whose routes call a real upstream through `req.client`,
/// driven over real sockets, shut down gracefully, and read back from a real VictoriaMetrics.
@Suite struct VaporClientRecordingTests {
    struct Charge: Content {
        var id: String
    }

    struct NewCharge: Content {
        var amount: Int
    }

    /// The upstream API the application calls; `seen` gets the path of each request as it arrives.
    static func upstream(seen: Locked<[String]>, release: AsyncStream<Void>) async throws -> LoopbackHTTPServer {
        try await LoopbackHTTPServer.start { request in
            seen.withLock { $0.append(request.path) }
            switch (request.method, request.path) {
            case ("GET", "/charges/42"): return .json(200, #"{"id": "ch_42"}"#)
            case ("GET", "/charges/43"): return .text(200, "<html>maintenance</html>")
            case ("POST", "/charges"):
                let amount = (try? JSONDecoder().decode(NewCharge.self, from: Data(request.body)))?.amount ?? -1
                return .json(201, #"{"id": "ch_\#(amount)"}"#)
            case ("GET", "/ledger/7"): return .text(500, "ledger down")
            case ("GET", "/reports/1"):
                // Held until the test lets it go: a request in flight when the application stops.
                for await _ in release { break }
                return .json(200, #"{"id": "report_1"}"#)
            default: return .text(404, "")
            }
        }
    }

    /// An application recording its client with `agent`, routes calling `api` (and `down`, which refuses).
    static func application(agent: APIHealthAgent, api: String, down: URL) async throws -> Application {
        let app = try await Application.make(.testing)
        app.http.server.configuration.hostname = "127.0.0.1"
        app.http.server.configuration.port = 0
        // AsyncHTTPClient retries a refused connection until its connect timeout (10 s by default) and then
        // fails with the refusal: a loopback connection takes microseconds.
        app.http.client.configuration.timeout.connect = .seconds(1)
        app.lifecycle.use(APIHealthLifecycle(agent))
        app.clients.use(.apihealth(agent, module: "payments"))

        app.get("charge", ":id") { req async throws -> Response in
            let url = URI(string: api + "/charges/" + (req.parameters.get("id") ?? ""))
            let response = try await req.client.get(url)
            do {
                let charge = try agent.decode(Charge.self, from: response, url: url, module: "payments")
                return Response(status: .ok, body: .init(string: charge.id))
            } catch {
                return Response(status: .badGateway, body: .init(string: "not a charge"))
            }
        }
        app.post("charge") { req async throws -> String in
            let response = try await req.client.post(URI(string: api + "/charges"), content: NewCharge(amount: 1200))
            return "\(response.status.code) \(try response.content.decode(Charge.self).id)"
        }
        app.get("ledger") { req async throws -> String in
            let response = try await req.client.recording(module: "ledger").get(URI(string: api + "/ledger/7"))
            return "ledger \(response.status.code)"
        }
        app.get("down") { req async throws -> String in
            do {
                _ = try await req.client.get(URI(string: down.absoluteString + "/status"))
                return "up"
            } catch {
                return "refused"
            }
        }
        app.get("report") { req async throws -> String in
            let response = try await req.client.recording(module: "reports").get(URI(string: api + "/reports/1"))
            return "report \(response.status.code)"
        }
        try await app.asyncBoot()
        try await app.server.start(address: nil)
        return app
    }

    @Test func recordsEveryClientCallOfARealApplicationAndSendsThemWhenItStops() async throws {
        let victoria = try VictoriaMetrics()
        let service = "vapor_\(UInt32.random(in: 0...UInt32.max))"
        var configuration = APIHealthConfiguration(
            serviceName: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
        )
        configuration.spool = nil
        // A raw point for every call: the series of each status are read below.
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
        let (release, releaseReport) = AsyncStream.makeStream(of: Void.self)
        let seen = Locked([String]())
        let api = try await Self.upstream(seen: seen, release: release)
        let down = try RefusingPort()
        let app = try await Self.application(agent: agent, api: api.baseURL, down: down.url)
        let port = try #require(app.http.server.shared.localAddress?.port)
        let base = URL(string: "http://127.0.0.1:\(port)")!

        func call(_ method: String, _ path: String) async throws -> String {
            let reply = try await HTTP.send(method, base.appendingPathComponent(path))
            return "\(reply.status) \(reply.text)"
        }
        #expect(try await call("GET", "charge/42") == "200 ch_42")
        #expect(try await call("GET", "charge/43") == "502 not a charge")
        #expect(try await call("POST", "charge") == "200 201 ch_1200")
        #expect(try await call("GET", "ledger") == "200 ledger 500")
        #expect(try await call("GET", "down") == "200 refused")

        // A request still in flight when the application stops: its server finishes it before the agent
        // stops, so its outgoing call is recorded and sent too.
        let report = Task { try await call("GET", "report") }
        #expect(await waitUntil { seen.withLock { $0.contains("/reports/1") } })
        let stopping = Task { try await app.asyncShutdown() }
        #expect(await waitUntil { !(await Self.accepts(port: port)) }, "the server stops taking connections")
        releaseReport.yield()
        #expect(try await report.value == "200 report 200")
        try await stopping.value
        #expect(agent.metrics.pointsRejected == 0)
        #expect(agent.metrics.pendingLines == 0)
        try await api.shutdown()

        let now = Date().timeIntervalSince1970
        let requests = try await victoria.query(
            #"sum by (path, method, module, status_class) (sum_over_time(apihealth_request_interval_count{service="\#(service)"}[1d]))"#,
            at: now
        )
        let counted = Dictionary(
            uniqueKeysWithValues: requests.map {
                (Self.key($0, ["method", "path", "module", "status_class"]), Int($0.value))
            }
        )
        #expect(
            counted == [
                "GET /charges/{id} payments 2xx": 2,
                "POST /charges payments 2xx": 1,
                "GET /ledger/{id} ledger 5xx": 1,
                "GET /status payments error": 1,
                "GET /reports/{id} reports 2xx": 1,
            ],
            "\(counted)"
        )
        let statuses = try await victoria.query(
            #"count by (path, method, module, status) (last_over_time(apihealth_request_duration_ms{service="\#(service)"}[1d]))"#,
            at: now
        )
        let series = Set(statuses.map { Self.key($0, ["method", "path", "module", "status"]) })
        #expect(
            series == [
                "GET /charges/{id} payments 200", "POST /charges payments 201", "GET /ledger/{id} ledger 500",
                "GET /status payments error", "GET /reports/{id} reports 200",
            ],
            "\(series)"
        )
        let failures = try await victoria.query(
            #"sum by (path, module, status) (sum_over_time(apihealth_parse_failure_count{service="\#(service)"}[1d]))"#,
            at: now
        )
        #expect(
            failures.map { "\(Self.key($0, ["path", "module", "status"])) \(Int($0.value))" } == [
                "/charges/{id} payments 200 1"
            ]
        )
    }

    /// The values of `names` among a series' labels, `-` for one it has not.
    static func key(_ sample: VictoriaMetrics.Sample, _ names: [String]) -> String {
        names.map { sample.labels[$0] ?? "-" }.joined(separator: " ")
    }

    /// Vapor's client sends a request's body as one buffer: a GraphQL operation's name is read from it, and
    /// each operation is an endpoint of its own in VictoriaMetrics.
    @Test func graphQLOperationsOfVaporsClientAreEndpoints() async throws {
        let victoria = try VictoriaMetrics()
        let service = "vapor_graphql_\(UInt32.random(in: 0...UInt32.max))"
        var configuration = APIHealthConfiguration(
            serviceName: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
        )
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
        agent.start()
        let api = try await LoopbackHTTPServer.start { request in
            request.path == "/graphql" ? .json(200, #"{"data":{}}"#) : .text(404, "")
        }
        let app = try await Application.make(.testing)
        app.clients.use(.apihealth(agent, module: "app"))
        try await app.asyncBoot()
        let endpoint = URI(string: api.baseURL + "/graphql")
        for operation in ["GetUser", "GetUser", "ListOrders"] {
            let response = try await app.client.post(endpoint) { request in
                request.headers.contentType = .json
                request.body = ByteBuffer(
                    string: #"{"query":"query \#(operation) { me }","operationName":"\#(operation)"}"#
                )
            }
            #expect(response.status == .ok)
        }
        let get = try await app.client.get(URI(string: api.baseURL + "/graphql?operationName=Feed&query=%7Bfeed%7D"))
        #expect(get.status == .ok)
        try await app.asyncShutdown()
        await agent.shutdown(deadline: .seconds(60))
        try await api.shutdown()
        var counted: [String: Int] = [:]
        _ = try await waitUntil {
            let samples = try await victoria.query(
                #"sum by (path, method) (sum_over_time(apihealth_request_interval_count{service="\#(service)"}[1d]))"#,
                at: Date().timeIntervalSince1970
            )
            counted = Dictionary(
                samples.map { (Self.key($0, ["method", "path"]), Int($0.value)) },
                uniquingKeysWith: +
            )
            return counted.values.reduce(0, +) >= 4
        }
        #expect(
            counted == ["POST /graphql/GetUser": 2, "POST /graphql/ListOrders": 1, "GET /graphql/Feed": 1],
            "\(counted)"
        )
    }

    /// Whether a new connection to `port` on loopback is taken.
    static func accepts(port: Int) async -> Bool {
        (try? await HTTP.send("GET", URL(string: "http://127.0.0.1:\(port)/nothing")!)) != nil
    }
}
