import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Passes every event on to the caller's delegate, unchanged and in order, and notes what the
/// request's sample needs on the way.
final class RecordingResponseDelegate<Wrapped: HTTPClientResponseDelegate>: HTTPClientResponseDelegate {
    typealias Response = Wrapped.Response

    private let wrapped: Wrapped
    private let observation: RequestObservation

    init(wrapping wrapped: Wrapped, observation: RequestObservation) {
        self.wrapped = wrapped
        self.observation = observation
    }

    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        wrapped.didSendRequestHead(task: task, head)
    }

    func didSendRequestPart(task: HTTPClient.Task<Response>, _ part: IOData) {
        observation.sent(part.readableBytes)
        wrapped.didSendRequestPart(task: task, part)
    }

    func didSendRequest(task: HTTPClient.Task<Response>) {
        wrapped.didSendRequest(task: task)
    }

    func didVisitURL(task: HTTPClient.Task<Response>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        observation.visitedURL()
        wrapped.didVisitURL(task: task, request, head)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        observation.receivedHead(status: Int(head.status.code), headers: head.headers, redirects: nil)
        return wrapped.didReceiveHead(task: task, head)
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        observation.received(buffer)
        return wrapped.didReceiveBodyPart(task: task, buffer)
    }

    func didReceiveError(task: HTTPClient.Task<Response>, _ error: any Error) {
        observation.fail(error)
        wrapped.didReceiveError(task: task, error)
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        observation.finish()
        return try wrapped.didFinishRequest(task: task)
    }
}
