import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the hook needs from the agent.
protocol SampleRecorder: AnyObject, Sendable {
    /// `false` once the agent is gone: its slot can serve another configuration.
    var isAlive: Bool { get }
    var isCapturing: Bool { get }
    var correlationHeaders: [String] { get }
    func isExcluded(_ url: URL) -> Bool
    func record(_ sample: RequestSample)
}

/// The instrumented configurations: each gets one of a fixed set of hook classes (URLSession takes
/// protocol classes, not instances), its module, and one inner session that performs its requests.
final class CaptureRegistry: Sendable {
    static let shared = CaptureRegistry()

    /// The hook classes, one per instrumented configuration.
    static let slotClasses: [InterceptingURLProtocol.Type] = [
        CaptureSlot0.self, CaptureSlot1.self, CaptureSlot2.self, CaptureSlot3.self, CaptureSlot4.self,
        CaptureSlot5.self, CaptureSlot6.self, CaptureSlot7.self, CaptureSlot8.self, CaptureSlot9.self,
        CaptureSlot10.self, CaptureSlot11.self, CaptureSlot12.self, CaptureSlot13.self, CaptureSlot14.self,
        CaptureSlot15.self,
    ]

    struct Entry: Sendable {
        var module: String
        var recorder: any SampleRecorder
        var session: URLSession
        var delegate: InnerSessionDelegate
    }

    private let entries = Locked([Int: Entry]())
    /// Slots by (recorder, module, configuration identity), so instrumenting again reuses one.
    private let keys = Locked([String: Int]())

    func entry(_ slot: Int) -> Entry? { entries.withLock { $0[slot] } }

    /// Registers `configuration` for `module` and returns its hook class.
    func register(
        _ configuration: URLSessionConfiguration, module: String, recorder: any SampleRecorder, streamsBodies: Bool
    ) -> InterceptingURLProtocol.Type? {
        let key = "\(ObjectIdentifier(recorder).hashValue)|\(module)|\(streamsBodies)"
        if let slot = keys.withLock({ $0[key] }) { return Self.slotClasses[slot] }
        let innerConfiguration = configuration.copy() as! URLSessionConfiguration
        innerConfiguration.protocolClasses = (configuration.protocolClasses ?? []).filter { !($0 is InterceptingURLProtocol.Type) }
        let delegate = InnerSessionDelegate(streamsBodies: streamsBodies)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "APIHealth.capture.\(module)"
        let session = URLSession(configuration: innerConfiguration, delegate: delegate, delegateQueue: queue)
        return entries.withLock { entries -> InterceptingURLProtocol.Type? in
            guard let slot = (0..<Self.slotClasses.count).first(where: { entries[$0].map { !$0.recorder.isAlive } ?? true })
            else {
                session.invalidateAndCancel()
                return nil
            }
            delegate.slot = slot
            if let stale = entries[slot] {
                stale.session.finishTasksAndInvalidate()
                keys.withLock { keys in keys = keys.filter { $0.value != slot } }
            }
            entries[slot] = Entry(module: module, recorder: recorder, session: session, delegate: delegate)
            keys.withLock { $0[key] = slot }
            return Self.slotClasses[slot]
        }
    }
}

/// Routes the inner session's events to the interception that owns each task.
///
/// `@unchecked Sendable`: `slot` is set once before the session is used; `owners` is locked.
final class InnerSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let streamsBodies: Bool
    var slot = 0
    private let owners = Locked([Int: InterceptingURLProtocol]())
    private let metrics = Locked([Int: URLSessionTaskMetrics]())

    init(streamsBodies: Bool) {
        #if canImport(Darwin)
        self.streamsBodies = true
        #else
        self.streamsBodies = streamsBodies
        #endif
    }

    func register(_ task: URLSessionTask, for owner: InterceptingURLProtocol) {
        owners.withLock { $0[task.taskIdentifier] = owner }
    }

    private func owner(_ task: URLSessionTask) -> InterceptingURLProtocol? {
        owners.withLock { $0[task.taskIdentifier] }
    }

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
        owner(dataTask)?.innerDidReceive(data, streams: streamsBodies)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        owner(task)?.innerWillRedirect()
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        self.metrics.withLock { $0[task.taskIdentifier] = metrics }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let owner = owners.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        let collected = metrics.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        guard let owner, let entry = CaptureRegistry.shared.entry(slot) else { return }
        owner.innerDidComplete(task: task, error: error, entry: entry, metrics: collected)
    }
}

// One hook class per instrumented configuration: URLSession only takes classes.
final class CaptureSlot0: InterceptingURLProtocol { override class var slot: Int { 0 } }
final class CaptureSlot1: InterceptingURLProtocol { override class var slot: Int { 1 } }
final class CaptureSlot2: InterceptingURLProtocol { override class var slot: Int { 2 } }
final class CaptureSlot3: InterceptingURLProtocol { override class var slot: Int { 3 } }
final class CaptureSlot4: InterceptingURLProtocol { override class var slot: Int { 4 } }
final class CaptureSlot5: InterceptingURLProtocol { override class var slot: Int { 5 } }
final class CaptureSlot6: InterceptingURLProtocol { override class var slot: Int { 6 } }
final class CaptureSlot7: InterceptingURLProtocol { override class var slot: Int { 7 } }
final class CaptureSlot8: InterceptingURLProtocol { override class var slot: Int { 8 } }
final class CaptureSlot9: InterceptingURLProtocol { override class var slot: Int { 9 } }
final class CaptureSlot10: InterceptingURLProtocol { override class var slot: Int { 10 } }
final class CaptureSlot11: InterceptingURLProtocol { override class var slot: Int { 11 } }
final class CaptureSlot12: InterceptingURLProtocol { override class var slot: Int { 12 } }
final class CaptureSlot13: InterceptingURLProtocol { override class var slot: Int { 13 } }
final class CaptureSlot14: InterceptingURLProtocol { override class var slot: Int { 14 } }
final class CaptureSlot15: InterceptingURLProtocol { override class var slot: Int { 15 } }
