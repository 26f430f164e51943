import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The URLSession hook: re-issues each http(s) request of an instrumented configuration on that
/// configuration's one inner session (without the hook, and marked so it is never intercepted twice),
/// forwards everything it gets back unchanged, and records a ``RequestSample`` when it ends.
///
/// The URL loading system drives it from its own queues; the mutable state of an instance is guarded
/// by `progress`.
class InterceptingURLProtocol: URLProtocol {
    /// Which instrumented configuration (module) this class serves. Each subclass overrides it.
    class var slot: Int { 0 }

    static let handledKey = "APIHealth.handled"

    /// Mutable state of one interception.
    private struct Progress {
        var innerTask: URLSessionDataTask?
        var stopped = false
        var started = ContinuousClock.now
        var startedAt = Date()
        var firstByte: Duration?
        var response: HTTPURLResponse?
        var body = Data()
        var responseBytes: UInt64 = 0
        var redirects = 0
    }

    private let progress = Locked(Progress())

    override class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        if URLProtocol.property(forKey: handledKey, in: request) != nil { return false }
        guard let entry = CaptureRegistry.shared.entry(slot), entry.recorder.isCapturing, let url = request.url else {
            return false
        }
        return !entry.recorder.isExcluded(url)
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let entry = CaptureRegistry.shared.entry(Self.slot) else {
            client?.urlProtocol(self, didFailWithError: URLError(.cancelled))
            return
        }
        #if !canImport(Darwin)
        if task is URLSessionDownloadTask {
            // swift-corelibs-foundation hands a download's file to the task through state only its own
            // protocol can set; forwarding one would crash the task, so it fails with a clear error.
            client?.urlProtocol(self, didFailWithError: CaptureError.downloadTasksUnsupportedOnLinux)
            return
        }
        #endif
        var inner = request
        if inner.httpBody == nil && inner.httpBodyStream == nil, let body = UploadBody.of(task) { inner.httpBody = body }
        let marked = (inner as NSURLRequest).mutableCopy() as! NSMutableURLRequest
        URLProtocol.setProperty(true, forKey: Self.handledKey, in: marked)
        let outgoing = marked as URLRequest
        progress.withLock { state in
            state.started = .now
            state.startedAt = Date()
        }
        // corelibs deadlocks if a task is created from inside startLoading(): hop to another queue.
        let owner = UncheckedSendable(self)
        DispatchQueue.global().async {
            let innerTask = entry.session.dataTask(with: outgoing)
            let stopped = owner.value.progress.withLock { state -> Bool in
                state.innerTask = innerTask
                return state.stopped
            }
            if stopped { return }
            entry.delegate.register(innerTask, for: owner.value)
            innerTask.resume()
        }
    }

    override func stopLoading() {
        let task = progress.withLock { state -> URLSessionDataTask? in
            state.stopped = true
            return state.innerTask
        }
        // Called on corelibs' shared work queue, which cancelling the inner task needs too: hop off it.
        let inner = UncheckedSendable(task)
        DispatchQueue.global().async { inner.value?.cancel() }
    }

    // MARK: Events from the inner session

    func innerDidReceive(_ response: URLResponse) {
        progress.withLock { state in
            state.firstByte = .now - state.started
            state.response = response as? HTTPURLResponse
        }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
    }

    func innerDidReceive(_ data: Data, streams: Bool) {
        let forward = progress.withLock { state -> Bool in
            state.responseBytes += UInt64(data.count)
            if state.stopped { return false }
            if !streams { state.body.append(data) }
            return streams
        }
        if forward { client?.urlProtocol(self, didLoad: data) }
    }

    func innerWillRedirect() {
        progress.withLock { $0.redirects += 1 }
    }

    func innerDidComplete(task: URLSessionTask, error: (any Error)?, entry: CaptureRegistry.Entry, metrics: URLSessionTaskMetrics?) {
        let state = progress.withLock { state -> Progress in
            let copy = state
            state.body = Data()
            return copy
        }
        let sampleError: (any Error)? = error ?? (state.stopped ? URLError(.cancelled) : nil)
        var sample: RequestSample
        if let metrics, let fromMetrics = RequestSample(
            metrics: metrics, task: task, module: entry.module, correlationHeaders: entry.recorder.correlationHeaders)
        {
            sample = fromMetrics
        } else {
            sample = RequestSample(
                method: request.httpMethod ?? "GET", url: request.url!, module: entry.module, startedAt: state.startedAt,
                duration: .now - state.started)
            sample.timeToFirstByte = state.firstByte
            sample.requestBytes = UInt64(max(0, task.countOfBytesSent))
            sample.redirectCount = state.redirects
            sample.correlationID = CorrelationID.find(
                in: request, response: state.response, headers: entry.recorder.correlationHeaders)
        }
        sample.url = request.url ?? sample.url
        sample.module = entry.module
        sample.statusCode = sampleError == nil ? (state.response?.statusCode ?? sample.statusCode) : nil
        sample.error = sampleError.map(RequestSample.TransportError.init)
        sample.responseBytes = state.responseBytes
        // Recorded before the app hears of the end, so a caller that awaits the response and then
        // shuts the agent down never loses this sample.
        entry.recorder.record(sample)
        if !state.stopped {
            if let error {
                client?.urlProtocol(self, didFailWithError: error)
            } else {
                if !state.body.isEmpty { client?.urlProtocol(self, didLoad: state.body) }
                client?.urlProtocolDidFinishLoading(self)
            }
        }
    }
}

/// Why the hook refused a request.
public enum CaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// On Linux, URLSession download tasks cannot pass through a URLProtocol: use a data task, or an
    /// uninstrumented configuration, for downloads.
    case downloadTasksUnsupportedOnLinux

    public var description: String {
        "APIHealth: download tasks cannot be instrumented on Linux (swift-corelibs-foundation); use a data task"
    }
}

/// The body of `uploadTask(with:from:)`, which swift-corelibs-foundation keeps on the task, not on
/// its request. Read by reflection, on Linux only; Apple platforms put it where URLProtocol sees it.
enum UploadBody {
    static func of(_ task: URLSessionTask?) -> Data? {
        #if canImport(Darwin)
        return nil
        #else
        guard let task = task as? URLSessionUploadTask else { return nil }
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror {
            for child in current.children where child.label == "knownBody" {
                return data(in: child.value)
            }
            mirror = current.superclassMirror
        }
        return nil
        #endif
    }

    private static func data(in value: Any) -> Data? {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return nil }
            return data(in: wrapped)
        }
        for child in mirror.children {
            if child.label == "data", let dispatchData = child.value as? DispatchData { return Data(dispatchData) }
            if child.label == "file", let url = child.value as? URL { return try? Data(contentsOf: url) }
        }
        return nil
    }
}

/// Carries a value the URL loading system already synchronises across a concurrency boundary.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
