import AsyncHTTPClient
import NIOCore

/// A response body passed through chunk by chunk, counting bytes and ending the request's sample when
/// the caller reaches its end or it fails.
struct ObservedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let base: HTTPClientResponse.Body
    let observation: RequestObservation

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: HTTPClientResponse.Body.AsyncIterator
        let observation: RequestObservation

        mutating func next() async throws -> ByteBuffer? {
            do {
                guard let chunk = try await base.next() else {
                    observation.finish()
                    return nil
                }
                observation.received(chunk)
                return chunk
            } catch {
                observation.fail(error)
                throw error
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), observation: observation)
    }
}
