@_spi(Reflection) import Swift
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What swift-corelibs-foundation keeps in a task that the hook needs and no API gives, read through
/// reflection metadata (its `URLSessionTask` is a Swift class). A field not found as expected (Apple
/// platforms, or a Foundation that names or lays it out otherwise) reads as absent, and the hook then
/// does without it.
enum CorelibsTask {
    /// How the app hears of the end of `task`.
    struct Delivery {
        /// The session's delegate queue, when it runs one operation at a time: the app's completion
        /// handler or delegate is called from an operation put on it when the task ends.
        var serialDelegateQueue: OperationQueue?
        /// Whether the completion handler is called on the task's work queue, from inside the protocol
        /// client's call that ends the task (the async APIs ask for this).
        var callsCompletionInline = false
    }

    /// How the app hears of the end of `task`: read once, when the hook starts it, from two fields
    /// set when the task is made. A `Mirror` would cost the request tens of thousands of instructions:
    /// these are two loads at offsets found once (``deliveryFields``).
    static func delivery(of task: URLSessionTask) -> Delivery {
        var delivery = Delivery()
        let fields = deliveryFields
        let base = UnsafeRawPointer(Unmanaged.passUnretained(task).toOpaque())
        if let offset = fields.callsCompletionInline {
            delivery.callsCompletionInline = base.load(fromByteOffset: offset, as: Bool.self)
        }
        // A class-bound existential's first word is the object, zero for `nil`; the task keeps its
        // session alive.
        if let offset = fields.session, let object = base.load(fromByteOffset: offset, as: UnsafeRawPointer?.self),
            let session = Unmanaged<AnyObject>.fromOpaque(object).takeUnretainedValue() as? URLSession,
            session.delegateQueue.maxConcurrentOperationCount == 1
        {
            delivery.serialDelegateQueue = session.delegateQueue
        }
        return delivery
    }

    /// The response `task` holds, read where swift-corelibs-foundation wrote it: when a leg completes, it sets
    /// the task's response and then, on the same thread, tells the protocol's client the leg finished. There,
    /// and only there, the field is read directly, without the synchronous hop onto the task's queue that
    /// `response` makes. `nil` when the field is not found as expected; then ask the task.
    static func responseAsLegFinishes(of task: URLSessionTask) -> URLResponse?? {
        guard let offset = deliveryFields.response else { return nil }
        return withExtendedLifetime(task) {
            UnsafeRawPointer(Unmanaged.passUnretained(task).toOpaque())
                .load(fromByteOffset: offset, as: URLResponse?.self)
        }
    }

    /// The byte offsets in a `URLSessionTask` of its `session` (an optional class-bound existential,
    /// two words), `_callCompletionHandlerInline` (a `Bool`) and `_response` (an optional `URLResponse`), from
    /// the type's reflection metadata; `nil` for a field not found with that layout (Apple platforms,
    /// another Foundation).
    private static let deliveryFields: (session: Int?, callsCompletionInline: Int?, response: Int?) = {
        #if canImport(Darwin)
        return (nil, nil, nil)
        #else
        func size<T>(_: T.Type) -> Int { MemoryLayout<T>.size }
        var session: Int?
        var callsCompletionInline: Int?
        var response: Int?
        // `.classType` and `.ignoreUnknown`, by value: the standard library declares them as mutable
        // statics, which strict concurrency refuses to read.
        let options = _EachFieldOptions(rawValue: 1 << 0 | 1 << 1)
        _forEachField(of: URLSessionTask.self, options: options) { name, offset, type, kind in
            switch String(cString: name) {
            case "session" where kind == .optional && _openExistential(type, do: size) == 2 * MemoryLayout<Int>.size:
                session = offset
            case "_callCompletionHandlerInline" where type == Bool.self:
                callsCompletionInline = offset
            case "_response" where type == URLResponse?.self:
                response = offset
            default:
                break
            }
            return true
        }
        return (session, callsCompletionInline, response)
        #endif
    }()

    /// What a task holds as its protocol.
    enum ProtocolInUse {
        case existing(URLProtocol)
        /// Being made, or none any more (the task ended).
        case none
        /// This Foundation does not keep it where the hook looks.
        case unreadable
    }

    /// The protocol `task` runs now (`_protocolStorage = .existing(…)`), read under the lock the task
    /// keeps for it (`_protocolLock`). Only the fields up to it are read: the ones after may be
    /// changing on other threads.
    static func protocolInUse(by task: URLSessionTask) -> ProtocolInUse {
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror {
            let children = current.children.makeIterator()
            while let child = children.next() {
                guard child.label == "_protocolLock" else { continue }
                guard let lock = child.value as? NSLock else { return .unreadable }
                lock.lock()
                defer { lock.unlock() }
                guard let storage = children.next(), storage.label == "_protocolStorage" else { return .unreadable }
                guard let payload = Mirror(reflecting: storage.value).children.first, payload.label == "existing",
                    let urlProtocol = payload.value as? URLProtocol
                else { return .none }
                return .existing(urlProtocol)
            }
            mirror = current.superclassMirror
        }
        return .unreadable
    }
}
