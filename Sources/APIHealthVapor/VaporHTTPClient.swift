import AsyncHTTPClient
import Foundation
import NIOCore
import Vapor

/// Vapor's own HTTP client (what `app.clients.use(.http)` gives), over the application's shared
/// `HTTPClient`: Vapor keeps its adapter private, so this is the same few lines, sending each request
/// as Vapor does (the URL checked first, the request's timeout as the deadline, the body collected).
struct VaporHTTPClient: Client {
    let http: HTTPClient
    let eventLoop: any EventLoop
    var logger: Logger?
    var byteBufferAllocator: ByteBufferAllocator

    func send(_ request: ClientRequest) -> EventLoopFuture<ClientResponse> {
        let text = request.url.string
        guard let url = URL(string: text) else {
            logger?.debug("\(text) is an invalid URL")
            return eventLoop.makeFailedFuture(Abort(.internalServerError, reason: "\(text) is an invalid URL"))
        }
        do {
            let outgoing = try HTTPClient.Request(
                url: url,
                method: request.method,
                headers: request.headers,
                body: request.body.map { .byteBuffer($0) }
            )
            let allocator = byteBufferAllocator
            return http.execute(
                request: outgoing,
                eventLoop: .delegate(on: eventLoop),
                deadline: request.timeout.map { NIODeadline.now() + $0 },
                logger: logger
            ).map { response in
                ClientResponse(
                    status: response.status,
                    headers: response.headers,
                    body: response.body,
                    byteBufferAllocator: allocator
                )
            }
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    func delegating(to eventLoop: any EventLoop) -> any Client {
        VaporHTTPClient(http: http, eventLoop: eventLoop, logger: logger, byteBufferAllocator: byteBufferAllocator)
    }

    func logging(to logger: Logger) -> any Client {
        VaporHTTPClient(http: http, eventLoop: eventLoop, logger: logger, byteBufferAllocator: byteBufferAllocator)
    }

    func allocating(to byteBufferAllocator: ByteBufferAllocator) -> any Client {
        VaporHTTPClient(http: http, eventLoop: eventLoop, logger: logger, byteBufferAllocator: byteBufferAllocator)
    }
}
