import Foundation

/// The package's one lock: a value that is only read or changed while holding it.
///
/// ```swift
/// /// Guards the number of requests seen.
/// let requests = Locked<UInt64>(0)
/// requests.withLock { $0 += 1 }
/// ```
///
/// Available on every platform `Package.swift` declares (`Synchronization.Mutex` and `Atomic` need
/// macOS 15 / iOS 18), and at `package` access so every target of the package uses this one. A lock
/// around code rather than a value is a `Locked<Void>`; a counter is a `Locked<UInt64>`.
///
/// `@unchecked Sendable` because the lock, not the type system, serialises every access to `state`.
package final class Locked<State>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    /// Exclusive access is the lock's to enforce: the runtime's own check would only repeat it on
    /// every access.
    @usableFromInline @exclusivity(unchecked) var state: State

    package init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with the state, holding the lock; never call back into the same lock from `body`.
    @inlinable @inline(__always)
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }

    /// Runs `body` if the lock is free now; `nil` without waiting if another thread holds it.
    @inline(__always)
    func withLockIfAvailable<Result>(_ body: (inout State) throws -> Result) rethrows -> Result? {
        guard lock.try() else { return nil }
        defer { lock.unlock() }
        return try body(&state)
    }
}

extension Locked where State == Void {
    /// A lock around code rather than a value.
    package convenience init() {
        self.init(())
    }

    /// Runs `body` holding the lock.
    @inlinable @inline(__always)
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Takes the lock, for code that holds it across steps that throw typed errors (pair it with
    /// ``unlock()`` in a `defer`).
    @inline(__always)
    func acquire() { lock.lock() }

    /// Lets go of the lock taken with ``acquire()``.
    @inline(__always)
    func release() { lock.unlock() }
}
