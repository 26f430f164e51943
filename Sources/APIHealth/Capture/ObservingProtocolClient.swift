import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if !canImport(Darwin)
/// Sits between one of swift-corelibs-foundation's HTTP protocols and the app's task on Linux: tells
/// the ``CapturedRequest`` when the response head and body arrive and how the leg ends, and passes
/// every event on unchanged, in the order and on the queue the protocol chose.
///
/// A request has one leg per protocol that runs for it: the one the hook starts, and the retry with a
/// credential after an authentication challenge (see ``CapturedRequest``).
final class ObservingProtocolClient: NSObject, URLProtocolClient, @unchecked Sendable {
    // @unchecked: the properties never change (what the request has seen is confined as
    // `CapturedRequest` says).
    private let forward: any URLProtocolClient
    private let request: CapturedRequest
    private let leg: Int

    init(forwardingTo forward: any URLProtocolClient, request: CapturedRequest, leg: Int) {
        self.forward = forward
        self.request = request
        self.leg = leg
    }

    func urlProtocol(
        _ protocol: URLProtocol,
        didReceive response: URLResponse,
        cacheStoragePolicy policy: URLCache.StoragePolicy
    ) {
        request.responseHead(response, leg: leg)
        forward.urlProtocol(`protocol`, didReceive: response, cacheStoragePolicy: policy)
    }

    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        request.loaded(data, leg: leg)
        forward.urlProtocol(`protocol`, didLoad: data)
    }

    /// The request's end is handed over before the app hears of it (see ``CapturedRequest``): it is
    /// encoded off this path, at the agent's next drain, which shutdown and every read of the agent's
    /// metrics wait for, so a caller that awaits the response and then shuts the agent down never loses
    /// it.
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        request.finished(leg: leg)
        forward.urlProtocolDidFinishLoading(`protocol`)
    }

    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
        request.failed(error, leg: leg)
        forward.urlProtocol(`protocol`, didFailWithError: error)
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        forward.urlProtocol(`protocol`, wasRedirectedTo: request, redirectResponse: redirectResponse)
    }

    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        request.answeredFromCache(leg: leg)
        forward.urlProtocol(`protocol`, cachedResponseIsValid: cachedResponse)
    }

    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        forward.urlProtocol(`protocol`, didReceive: challenge)
    }

    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        forward.urlProtocol(`protocol`, didCancel: challenge)
    }
}
#endif
