import Foundation

/// Runs `body` on a thread of its own and returns what it returns: for a test whose work is long and
/// synchronous, so that it does not hold one of the few threads of Swift's concurrency pool (two on a
/// 2-core machine) for seconds while other tests' agents wait on that pool for their own loops.
/// Expectations belong after it, in the test (`body` runs outside the test's task).
///
/// ```swift
/// let points = try await onOwnThread {
///     for sample in samples { agent.record(sample) }
///     return agent.pendingPoints()
/// }
/// #expect(points.count == samples.count)
/// ```
public func onOwnThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
