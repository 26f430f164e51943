import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session that re-issues an instrumented configuration's requests on Apple platforms, where the
/// hook cannot hand a task to the system's own HTTP protocol. Made from a copy of the configuration
/// (without the hook) when it is instrumented.
final class InnerSession: Sendable {
    let session: URLSession
    let delegate: InnerSessionDelegate

    init(copying configuration: URLSessionConfiguration, module: String) {
        let copy = (configuration.copy() as? URLSessionConfiguration) ?? .ephemeral
        copy.protocolClasses = (configuration.protocolClasses ?? []).filter { !($0 is InterceptingURLProtocol.Type) }
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "APIHealth.capture.\(module)"
        delegate = InnerSessionDelegate(queue: queue)
        session = URLSession(configuration: copy, delegate: delegate, delegateQueue: queue)
    }

    deinit { session.finishTasksAndInvalidate() }
}

/// One request re-issued on the inner session. Every call into the app's task goes through
/// `clientCalls`, a serial queue, and only between `start` and `stop`: once the app's task has
/// stopped, finished or failed, nothing more reaches it.
///
/// What has been seen of the request (`progress`) is that queue's: each event of the inner session hops
/// to it, updates what was seen and forwards the event to the app's task in the same turn, so it needs
/// no lock, and the sample is built there once the inner request ends, after every event before it.
final class InnerSessionLoad: @unchecked Sendable {
    private let client: any URLProtocolClient
    private weak var owner: URLProtocol?
    private let registration: CaptureRegistry.Registration
    private let inner: InnerSession
    private let clientCalls = DispatchQueue(label: "APIHealth.capture.client")

    private struct Progress {
        var innerTask: URLSessionDataTask?
        var request = URLRequest(url: URL(fileURLWithPath: "/"))
        var stopped = false
        var ended = false
        var started = ContinuousClock.now
        var startedAt = Date()
        var firstByte: Duration?
        var response: HTTPURLResponse?
        var responseBytes: UInt64 = 0
        var redirects = 0
        /// The digest of the body so far, with cache advice.
        var digest: BodyDigest?
    }

    /// What has been seen of this request: touched only on `clientCalls` (and in `init`, before any use).
    private var progress = Progress()

    init(
        owner: URLProtocol,
        client: any URLProtocolClient,
        registration: CaptureRegistry.Registration,
        inner: InnerSession
    ) {
        self.owner = owner
        self.client = client
        self.registration = registration
        self.inner = inner
        if registration.recorder.digestsBodies { progress.digest = BodyDigest() }
    }

    /// Issues `request` on the inner session; the sample's duration runs from `started`, when the
    /// app's task made the hook's protocol.
    func start(_ request: URLRequest, started: ContinuousClock.Instant, startedAt: Date) {
        guard let marked = (request as NSURLRequest).mutableCopy() as? NSMutableURLRequest else { return }
        URLProtocol.setProperty(true, forKey: InterceptingURLProtocol.handledKey, in: marked)
        let innerTask = inner.session.dataTask(with: marked as URLRequest)
        clientCalls.sync {
            progress.request = request
            progress.started = started
            progress.startedAt = startedAt
            progress.innerTask = innerTask
        }
        inner.delegate.register(innerTask, for: self)
        innerTask.resume()
    }

    func stop() {
        let innerTask = clientCalls.sync { () -> URLSessionDataTask? in
            progress.stopped = true
            return progress.innerTask
        }
        innerTask?.cancel()
    }

    /// On `clientCalls`: updates what was seen with `update`, then makes `call` against the app's task
    /// unless it has stopped or ended (`ending`: this call ends it).
    private func toClient(
        ending: Bool = false,
        updating update: @escaping @Sendable (inout Progress) -> Void = { _ in },
        _ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void
    ) {
        clientCalls.async { [self] in
            update(&progress)
            forward(ending: ending, call)
        }
    }

    /// Makes `call` against the app's task unless it has stopped or ended; on `clientCalls`.
    private func forward(ending: Bool, _ call: (any URLProtocolClient, URLProtocol) -> Void) {
        guard let owner, !progress.stopped, !progress.ended else { return }
        if ending { progress.ended = true }
        call(client, owner)
    }

    // MARK: Events from the inner session

    func innerDidReceive(_ response: URLResponse) {
        let now = ContinuousClock.now
        let response = UncheckedSendable(response)
        toClient(
            updating: { progress in
                progress.firstByte = now - progress.started
                progress.response = response.value as? HTTPURLResponse
            },
            { $0.urlProtocol($1, didReceive: response.value, cacheStoragePolicy: .notAllowed) }
        )
    }

    func innerDidReceive(_ data: Data) {
        toClient(
            updating: { progress in
                progress.responseBytes += UInt64(data.count)
                if progress.digest != nil { data.withUnsafeBytes { progress.digest?.update($0) } }
            },
            { $0.urlProtocol($1, didLoad: data) }
        )
    }

    /// Hands a redirect to the app's task, which asks the app's delegate and starts the new request
    /// itself; the inner task stops here.
    func innerWillRedirect(to request: URLRequest, response: HTTPURLResponse) {
        let redirect = UncheckedSendable((request, response))
        toClient(
            ending: true,
            updating: { $0.redirects += 1 },
            { $0.urlProtocol($1, wasRedirectedTo: redirect.value.0, redirectResponse: redirect.value.1) }
        )
    }

    /// The inner request ended: its sample is recorded and the end forwarded, on `clientCalls`, after
    /// every event before it.
    func innerDidComplete(task: URLSessionTask, error: (any Error)?, metrics: URLSessionTaskMetrics?) {
        let ended = ContinuousClock.now
        let completion = UncheckedSendable((task: task, error: error, metrics: metrics))
        clientCalls.async { [self] in
            let (task, error, metrics) = completion.value
            // A redirect went to the app's task, which starts the next request itself (recorded as its
            // own): this one ends there. The session answers a redirect it is told not to follow with the
            // redirect response as the final one, before the cancel takes: that is no answer the app sees.
            if progress.redirects > 0 { return }
            record(task: task, error: error, metrics: metrics, ended: ended)
            forward(ending: true) { client, owner in
                if let error {
                    client.urlProtocol(owner, didFailWithError: error)
                } else {
                    client.urlProtocolDidFinishLoading(owner)
                }
            }
        }
    }

    /// Records the sample of the request that ended at `ended`; on `clientCalls`.
    private func record(
        task: URLSessionTask,
        error: (any Error)?,
        metrics: URLSessionTaskMetrics?,
        ended: ContinuousClock.Instant
    ) {
        let state = progress
        let sampleError: (any Error)? = error ?? (state.stopped ? URLError(.cancelled) : nil)
        var sample: RequestSample
        if let metrics,
            let fromMetrics = RequestSample(
                metrics: metrics,
                task: task,
                module: registration.module,
                correlationHeaders: registration.recorder.correlationHeaders
            )
        {
            sample = fromMetrics
        } else if let url = state.request.url {
            sample = RequestSample(
                method: state.request.httpMethod ?? "GET",
                url: url,
                module: registration.module,
                startedAt: state.startedAt,
                duration: ended - state.started
            )
            sample.timeToFirstByte = state.firstByte
            sample.requestBytes = UInt64(max(0, task.countOfBytesSent))
            sample.correlationID = CorrelationID.find(
                in: state.request,
                response: state.response,
                headers: registration.recorder.correlationHeaders
            )
        } else {
            return
        }
        sample.module = registration.module
        sample.statusCode = sampleError == nil ? (state.response?.statusCode ?? sample.statusCode) : nil
        sample.error = sampleError.map(RequestSample.TransportError.init)
        sample.responseBytes = state.responseBytes
        registration.recorder.observeCountry(in: state.response)
        var cacheEvidence: CacheEvidence?
        if let digest = state.digest, let response = state.response {
            let request = state.request
            let policy = CachePolicy(
                method: request.httpMethod ?? "GET",
                statusCode: response.statusCode,
                requestHeader: { request.value(forHTTPHeaderField: $0) },
                header: { response.value(forHTTPHeaderField: $0) }
            )
            cacheEvidence = CacheEvidence(
                policy: policy,
                digest: sampleError == nil ? digest : nil,
                servedLocally: metrics.map(Self.servedLocally) ?? false
            )
        }
        registration.recorder.record(sample, request: state.request, cacheEvidence: cacheEvidence)
    }

    /// Whether the task's metrics say a local cache served the response (Apple platforms: swift-corelibs-
    /// foundation never delivers task metrics).
    private static func servedLocally(_ metrics: URLSessionTaskMetrics) -> Bool {
        #if canImport(Darwin)
        metrics.transactionMetrics.last?.resourceFetchType == .localCache
        #else
        false
        #endif
    }
}

/// Routes the inner session's events to the request that owns each task.
///
/// The session calls it on its delegate queue, which runs one operation at a time, and a task is
/// registered there too, before it is resumed: the running tasks are that queue's, with no lock.
final class InnerSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// The running inner tasks, by task identifier: their owners and the metrics collected for them.
    private struct Tasks {
        var owners: [Int: InnerSessionLoad] = [:]
        var metrics: [Int: URLSessionTaskMetrics] = [:]
    }

    /// The session's delegate queue (one operation at a time): the only code that touches `tasks`.
    let queue: OperationQueue
    private var tasks = Tasks()

    init(queue: OperationQueue) {
        self.queue = queue
    }

    /// Registers `task` on the delegate queue and returns once it is, before the task is resumed, so
    /// that every call about it finds its owner. Nothing on that queue waits for the caller's thread.
    func register(_ task: URLSessionTask, for owner: InnerSessionLoad) {
        let identifier = task.taskIdentifier
        let registration = BlockOperation { [self] in tasks.owners[identifier] = owner }
        queue.addOperations([registration], waitUntilFinished: true)
    }

    private func owner(_ task: URLSessionTask) -> InnerSessionLoad? {
        tasks.owners[task.taskIdentifier]
    }

    /// How many inner tasks are registered and not yet completed; read on the delegate queue.
    var runningTasks: Int { tasks.owners.count }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        owner(dataTask)?.innerDidReceive(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        owner(dataTask)?.innerDidReceive(data)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        owner(task)?.innerWillRedirect(to: request, response: response)
        completionHandler(nil)
        task.cancel()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        tasks.metrics[task.taskIdentifier] = metrics
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let owner = tasks.owners.removeValue(forKey: task.taskIdentifier)
        let collected = tasks.metrics.removeValue(forKey: task.taskIdentifier)
        owner?.innerDidComplete(task: task, error: error, metrics: collected)
    }
}

/// Carries a value the URL loading system already synchronises across a concurrency boundary.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
