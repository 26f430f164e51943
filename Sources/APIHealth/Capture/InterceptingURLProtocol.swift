import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The URLSession hook: a protocol class added to an instrumented configuration that observes each
/// http(s) request and records a ``RequestSample`` when it ends, without changing what the app sees.
///
/// - On Linux it hands the task to swift-corelibs-foundation's own HTTP protocol and watches its
///   events through an ``ObservingProtocolClient``. The request goes out once, from the app's own
///   session, and everything the app's session decides (redirects asked of its delegate,
///   authentication, timeouts, cookies, caching, download files, upload bodies) happens exactly as
///   without the hook. Every call into the app's task is made by that protocol, on the task's own
///   work queue, so none can reach a task that has stopped.
/// - On Apple platforms, which have no such protocol to hand over to, the request is re-issued on an
///   ``InnerSession`` and its events are forwarded in order (see ``InnerSessionLoad``).
///
/// The URL loading system calls `startLoading` and `stopLoading` one at a time, on one queue: corelibs on
/// the task's serial work queue (`URLSessionTask.resume()`, `suspend()` and `cancel()` each hop to it),
/// Apple's URL loading system on the protocol's client thread. So how an instance is loading
/// (`loading`) is that queue's, and needs no lock: only those two calls and `deinit` touch it.
class InterceptingURLProtocol: URLProtocol {
    /// Marks the requests the inner session re-issues, so they are never intercepted twice.
    static let handledKey = "APIHealth.handled"

    /// swift-corelibs-foundation's HTTP protocol, which the hook wraps on Linux.
    static let nativeProtocolClass: URLProtocol.Type? = {
        #if canImport(Darwin)
        return nil
        #else
        return _typeByName("FoundationNetworking._HTTPURLProtocol") as? URLProtocol.Type
        #endif
    }()

    /// Whether requests are observed through the platform's own protocol (Linux) rather than re-issued.
    static var wrapsNativeProtocol: Bool {
        #if canImport(Darwin)
        return false
        #else
        return true
        #endif
    }

    private enum Loading {
        case notStarted
        #if !canImport(Darwin)
        case native(URLProtocol, CapturedRequest?)
        #endif
        case inner(InnerSessionLoad)
    }

    /// Touched only by `startLoading`, `stopLoading` (on the task's queue, one at a time) and `deinit`.
    nonisolated(unsafe) private var loading = Loading.notStarted
    /// When the URL loading system made this protocol for the task: the start of the request as the
    /// hook can see it, before the hop to the task's work queue that `startLoading` comes after.
    private let created = ContinuousClock.now
    private let createdAt = Date()

    override class func canInit(with request: URLRequest) -> Bool {
        guard let url = request.url, Self.isHTTP(url) else { return false }
        if URLProtocol.property(forKey: handledKey, in: request) != nil { return false }
        guard let registration = CaptureRegistry.shared.registration(for: self), registration.recorder.isCapturing,
            !registration.recorder.isExcluded(url)
        else { return false }
        if wrapsNativeProtocol && nativeProtocolClass == nil {
            // This Foundation has no HTTP protocol under the expected name: leave the request alone.
            registration.recorder.countUncaptured()
            return false
        }
        return true
    }

    /// Whether `url`'s scheme is `http` or `https`, in any case (read from its text: Foundation's
    /// `scheme` parses the URL again).
    private static func isHTTP(_ url: URL) -> Bool {
        let text = url.absoluteString
        var bytes = text.utf8.makeIterator()
        for expected in "http".utf8 {
            guard let byte = bytes.next(), byte | 0x20 == expected else { return fallbackIsHTTP(url) }
        }
        switch bytes.next() {
        case UInt8(ascii: ":"): return true
        case let byte? where byte | 0x20 == UInt8(ascii: "s"): return bytes.next() == UInt8(ascii: ":")
        default: return fallbackIsHTTP(url)
        }
    }

    private static func fallbackIsHTTP(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased() else { return false }
        return scheme == "http" || scheme == "https"
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        switch loading {
        #if !canImport(Darwin)
        case .native(let native, _):
            // Resumed after a suspension: the native protocol picks up its transfer.
            native.startLoading()
            return
        #endif
        case .inner:
            return
        case .notStarted:
            break
        }
        guard let client else { return }
        let registration = CaptureRegistry.shared.registration(for: type(of: self))
        if Self.wrapsNativeProtocol {
            #if !canImport(Darwin)
            guard let task, let nativeClass = Self.nativeProtocolClass else {
                client.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
                return
            }
            // An agent that went away since canInit: the request still goes out, unobserved.
            let captured = registration.map {
                CapturedRequest(task: task, request: request, registration: $0, started: created, startedAt: createdAt)
            }
            let observer = captured.map { ObservingProtocolClient(forwardingTo: client, request: $0, leg: 0) }
            let native = nativeClass.init(task: task, cachedResponse: cachedResponse, client: observer ?? client)
            loading = .native(native, captured)
            native.startLoading()
            #endif
        } else {
            guard let registration, let inner = registration.innerSession else {
                client.urlProtocol(self, didFailWithError: URLError(.cancelled))
                return
            }
            let load = InnerSessionLoad(owner: self, client: client, registration: registration, inner: inner)
            loading = .inner(load)
            load.start(request, started: created, startedAt: createdAt)
        }
    }

    override func stopLoading() {
        switch loading {
        #if !canImport(Darwin)
        case .native(let native, let captured):
            let suspending = task?.state == .suspended
            native.stopLoading()
            if suspending {
                // Possibly for the retry of a challenge, whose protocol the request then follows.
                captured?.followRetry(replacing: self)
            } else {
                // A cancelled task is ended by the URL loading system itself, not through the
                // protocol's client: record it here.
                captured?.failed(task?.error ?? URLError(.cancelled), leg: nil)
            }
        #endif
        case .inner(let load): load.stop()
        case .notStarted: break
        }
    }

    deinit {
        #if !canImport(Darwin)
        if case .native(_, let captured?) = loading { captured.abandoned() }
        #endif
    }
}
