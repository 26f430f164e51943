import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What swift-corelibs-foundation keeps in a task that the hook needs and no API gives, read by
/// reflection (its `URLSessionTask` is a Swift class). Each read gives `nil` where a field is not
/// found (Apple platforms, or a Foundation that names it otherwise), and the hook then does without.
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

    /// How the app hears of the end of `task`: read once, when the hook starts it, from the two
    /// fields (set when the task is made) and no further.
    static func delivery(of task: URLSessionTask) -> Delivery {
        var delivery = Delivery()
        var found = 0
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror, found < 2 {
            for child in current.children {
                switch child.label {
                case "session":
                    found += 1
                    if let session = child.value as? URLSession, session.delegateQueue.maxConcurrentOperationCount == 1
                    {
                        delivery.serialDelegateQueue = session.delegateQueue
                    }
                case "_callCompletionHandlerInline":
                    found += 1
                    delivery.callsCompletionInline = child.value as? Bool ?? false
                default:
                    break
                }
                if found == 2 { break }
            }
            mirror = current.superclassMirror
        }
        return delivery
    }

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
