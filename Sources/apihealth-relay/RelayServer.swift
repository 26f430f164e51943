import APIHealthRelay
import Logging
import ServiceLifecycle
import Vapor

/// Vapor's HTTP server as a service: it listens until shutdown begins, then finishes the requests in
/// flight and stops, before the agent behind it sends what is pending.
struct RelayServer: Service {
    let application: Application
    let intake: RelayIntake
    let logger: Logger

    init(application: Application, intake: RelayIntake, logger: Logger) {
        self.application = application
        self.intake = intake
        self.logger = logger
        // The intake inflates gzip itself, up to the body limit, and counts what it refuses.
        application.http.server.configuration.requestDecompression = .disabled
        let intake = intake
        for path in [["api", "v2", "write"], ["write"]] {
            application.on(.POST, path.map { PathComponent(stringLiteral: $0) }, body: .stream) { request async in
                await Self.answer(request, intake: intake)
            }
        }
        application.get("health") { _ in "ok" }
    }

    func run() async throws {
        let configuration = intake.configuration
        try await application.server.start(address: .hostname(configuration.host, port: configuration.port))
        logger.info(
            "apihealth-relay listening",
            metadata: [
                "apihealth.relay.address": "\(configuration.host):\(configuration.port)",
                "apihealth.relay.keys": "\(configuration.keys.count)",
                "apihealth.relay.limit_bytes": "\(intake.limitBytes)",
            ]
        )
        try? await gracefulShutdown()
        await application.server.shutdown()
    }

    /// Reads the body up to the limit and hands the request to the intake.
    static func answer(_ request: Request, intake: RelayIntake) async -> Response {
        let limit = intake.configuration.maximumBodyBytes
        if let length = request.headers.first(name: .contentLength).flatMap({ Int($0) }), length > limit {
            return response(intake.refuseTooLarge())
        }
        var body: [UInt8] = []
        do {
            for try await chunk in request.body {
                guard body.count + chunk.readableBytes <= limit else { return response(intake.refuseTooLarge()) }
                body.append(contentsOf: chunk.readableBytesView)
            }
        } catch {
            return Response(status: .badRequest)
        }
        let answer = await intake.handle(
            IntakeRequest(
                authorization: request.headers.first(name: .authorization),
                password: request.query[String.self, at: "p"],
                precision: request.query[String.self, at: "precision"],
                contentEncoding: request.headers.first(name: .contentEncoding),
                client: client(of: request, header: intake.configuration.clientHeader),
                body: body
            )
        )
        return response(answer)
    }

    /// The client's address: the first of the trusted header's when one is configured, else the peer's.
    static func client(of request: Request, header: String?) -> String {
        if let header, let value = request.headers.first(name: header),
            let first = value.split(separator: ",").first?.trimmingCharacters(in: .whitespaces), !first.isEmpty
        {
            return first
        }
        return request.remoteAddress?.ipAddress ?? "unknown"
    }

    static func response(_ answer: IntakeAnswer) -> Response {
        var headers = HTTPHeaders()
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        return Response(
            status: HTTPResponseStatus(statusCode: answer.status),
            headers: headers,
            body: answer.body.isEmpty ? .empty : Response.Body(buffer: ByteBuffer(bytes: answer.body))
        )
    }
}
