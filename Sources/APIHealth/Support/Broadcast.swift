/// Wakes every task waiting on it when something changes; waiters check what they wait for again.
final class Broadcast: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// Guards the waiters and how many changes were announced.
    private let state = Locked(State())

    /// Wakes every waiter.
    func announce() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// How many changes were announced so far: pass it to ``wait(after:atMost:)`` to miss none.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Waits until a change after `generation` is announced, or `timeout` has passed, or the task is
    /// cancelled.
    func wait(after generation: UInt64, atMost timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.wait(after: generation) }
            await group.next()
            group.cancelAll()
        }
    }

    private func wait(after generation: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
