import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Gives a streamed upload's body to the task that asks for it.
private final class BodyStreamDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked: `body` never changes.
    let body: Data

    init(body: Data) { self.body = body }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        completionHandler(InputStream(data: body))
    }
}

/// Request bodies sent as streams, uploaded for real: line protocol to VictoriaMetrics, which takes
/// the chunked body swift-corelibs-foundation sends for a stream whatever `Content-Length` says.
@Suite struct StreamedUploadTests {
    @Test func streamedBodiesWithAKnownLengthCountTheirBytes() async throws {
        let victoria = try VictoriaMetrics()
        var configuration = APIHealthConfiguration(serviceName: "uploads")
        configuration.spool = nil
        // A point for every request: each upload's request_bytes is read.
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "uploads"))
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "uploads")
        let measurement = "upload_\(UInt32.random(in: 0...UInt32.max))"
        func body(_ run: String) -> Data {
            Data((0..<500).map { "\(measurement),run=\(run) value=\($0) \(1_700_000_000_000 + $0)\n" }.joined().utf8)
        }
        func request(_ body: Data, stream: Bool) -> URLRequest {
            var request = URLRequest(
                url: HTTP.url(victoria.base, "/api/v2/write", [("org", "o"), ("bucket", "b"), ("precision", "ms")])
            )
            request.httpMethod = "POST"
            request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
            if stream { request.httpBodyStream = InputStream(data: body) }
            return request
        }

        // The async API and a completion handler: no delegate counts a stream's bytes, the declared
        // length is what is counted.
        let session = URLSession(configuration: sessionConfiguration)
        let awaited = body("awaited")
        let (_, response) = try await session.data(for: request(awaited, stream: true))
        #expect((response as? HTTPURLResponse)?.statusCode == 204)
        let handled = body("handled")
        let status: Int? = await withCheckedContinuation { continuation in
            session.dataTask(with: request(handled, stream: true)) { _, response, _ in
                continuation.resume(returning: (response as? HTTPURLResponse)?.statusCode)
            }.resume()
        }
        #expect(status == 204)
        // A streamed upload task: its delegate gives the stream, and the task counts what was sent.
        let streamed = body("streamed")
        let delegateSession = URLSession(
            configuration: sessionConfiguration,
            delegate: BodyStreamDelegate(body: streamed),
            delegateQueue: nil
        )
        let uploaded: Int? = await withCheckedContinuation { continuation in
            let task = delegateSession.uploadTask(withStreamedRequest: request(streamed, stream: false))
            Task {
                _ = await waitUntil { task.state == .completed }
                continuation.resume(returning: (task.response as? HTTPURLResponse)?.statusCode)
            }
            task.resume()
        }
        #expect(uploaded == 204)

        let points = try await waitForValues(3) {
            agent.pendingPoints().filter {
                $0.measurement == PointSchema.Measurement.request && $0.tag("status") == "204"
            }
        }
        #expect(
            points.map { $0.field("request_bytes") } == [awaited, handled, streamed].map { .uint(UInt64($0.count)) }
        )
        // Every line arrived: the uploads were real.
        var stored = 0
        _ = try await waitUntil {
            stored = try await victoria.export(namePattern: "\(measurement)_value").reduce(0) { $0 + $1.values.count }
            return stored >= 1_500
        }
        #expect(stored == 1_500)
    }
}
