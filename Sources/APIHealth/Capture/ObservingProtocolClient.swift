import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sits between swift-corelibs-foundation's HTTP protocol and the app's task on Linux: notes when
/// the response head and body arrive and how the request ends, records one ``RequestSample``, and
/// passes every event on unchanged, in the order and on the queue the protocol chose.
final class ObservingProtocolClient: NSObject, URLProtocolClient, @unchecked Sendable {
    private let forward: any URLProtocolClient
    private weak var task: URLSessionTask?
    private let request: URLRequest
    private let registration: CaptureRegistry.Registration
    private let started = ContinuousClock.now
    private let startedAt = Date()

    private struct Progress {
        var firstByte: Duration?
        var response: HTTPURLResponse?
        var loadedBytes: UInt64 = 0
        var recorded = false
    }

    /// Guards what has been seen of the request so far.
    private let progress = Locked(Progress())

    init(
        forwardingTo forward: any URLProtocolClient,
        task: URLSessionTask,
        request: URLRequest,
        registration: CaptureRegistry.Registration
    ) {
        self.forward = forward
        self.task = task
        self.request = request
        self.registration = registration
    }

    func urlProtocol(
        _ protocol: URLProtocol,
        didReceive response: URLResponse,
        cacheStoragePolicy policy: URLCache.StoragePolicy
    ) {
        let now = ContinuousClock.now
        progress.withLock { state in
            if state.firstByte == nil { state.firstByte = now - started }
            state.response = response as? HTTPURLResponse
        }
        forward.urlProtocol(`protocol`, didReceive: response, cacheStoragePolicy: policy)
    }

    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        progress.withLock { $0.loadedBytes += UInt64(data.count) }
        forward.urlProtocol(`protocol`, didLoad: data)
    }

    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        recordOnce(error: nil)
        forward.urlProtocolDidFinishLoading(`protocol`)
    }

    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
        recordOnce(error: error)
        forward.urlProtocol(`protocol`, didFailWithError: error)
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        forward.urlProtocol(`protocol`, wasRedirectedTo: request, redirectResponse: redirectResponse)
    }

    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        forward.urlProtocol(`protocol`, cachedResponseIsValid: cachedResponse)
    }

    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        forward.urlProtocol(`protocol`, didReceive: challenge)
    }

    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        forward.urlProtocol(`protocol`, didCancel: challenge)
    }

    /// Hands the sample to the agent before the app hears of the end (it is encoded off this path,
    /// at the agent's next drain, which shutdown and every read of the agent's metrics wait for), so
    /// a caller that awaits the response and then shuts the agent down never loses it. Called for the end the protocol reports, and by the
    /// hook when the task is cancelled (which the protocol does not report to its client).
    ///
    /// Byte counts are what swift-corelibs-foundation lets a protocol see: the request body's
    /// length; the response body as delivered through the client, else the bytes counted on the task,
    /// else the response's `Content-Length`.
    func recordOnce(error: (any Error)?) {
        let duration = ContinuousClock.now - started
        guard
            let state = progress.withLock({ state -> Progress? in
                if state.recorded { return nil }
                state.recorded = true
                return state
            }), let url = request.url
        else { return }
        let response = (task?.response as? HTTPURLResponse) ?? state.response
        var sample = RequestSample(
            method: request.httpMethod ?? "GET",
            url: url,
            module: registration.module,
            startedAt: startedAt,
            duration: duration
        )
        sample.timeToFirstByte = state.firstByte
        if let error {
            sample.error = RequestSample.TransportError(error)
        } else {
            sample.statusCode = response?.statusCode
        }
        let counted = max(0, task?.countOfBytesReceived ?? 0)
        let announced = error == nil ? max(0, response?.expectedContentLength ?? 0) : 0
        sample.responseBytes = max(state.loadedBytes, UInt64(max(counted, Int64(announced))))
        let sent = max(task?.countOfBytesSent ?? 0, error == nil ? task?.countOfBytesExpectedToSend ?? 0 : 0)
        sample.requestBytes = UInt64(max(0, sent))
        sample.redirectCount = nil
        sample.correlationID = CorrelationID.find(
            in: request,
            response: response,
            headers: registration.recorder.correlationHeaders
        )
        registration.recorder.record(sample, request: request)
    }
}
