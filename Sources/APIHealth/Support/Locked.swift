import Foundation

/// A value that is only read or changed while holding its lock.
///
/// `@unchecked Sendable` because the lock, not the type system, serialises every access to `state`.
final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    /// Exclusive access is the lock's to enforce: the runtime's own check would only repeat it on
    /// every access.
    @exclusivity(unchecked) private var state: State

    init(_ state: State) {
        self.state = state
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
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
