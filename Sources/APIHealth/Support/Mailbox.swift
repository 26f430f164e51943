/// Wakes one waiting task; a signal sent while nobody waits is kept for the next wait.
typealias Wakeup = Mailbox<Never>

/// Wakes one waiting task, and holds what was posted to it until it takes it: the task that waits owns
/// what it is sent (an interval clock's jobs) and needs no lock of its own for it. A signal or post sent
/// while nobody waits is kept for the next wait.
///
/// ```swift
/// let added = Mailbox<Job>()
/// added.post(job)                               // any thread
/// await added.wait(until: deadline, on: clock)  // the one task that owns the jobs
/// jobs += added.takePosted()
/// ```
final class Mailbox<Message: Sendable>: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var posted: [Message] = []
        var isClosed = false
    }
    private let state = Locked(State())

    /// Keeps `message` for the task that waits, and wakes it; `false` (the message not kept) once the
    /// mailbox is closed.
    @discardableResult
    func post(_ message: Message) -> Bool {
        let kept = state.withLock { state -> Bool in
            if !state.isClosed { state.posted.append(message) }
            return !state.isClosed
        }
        if kept { signal() }
        return kept
    }

    /// Takes no more posts (the task that waited has ended); returns what was posted and not yet taken.
    func close() -> [Message] {
        state.withLock { state in
            state.isClosed = true
            defer { state.posted.removeAll() }
            return state.posted
        }
    }

    /// What was posted since the last call, oldest first.
    func takePosted() -> [Message] {
        state.withLock { state in
            defer { state.posted.removeAll() }
            return state.posted
        }
    }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Waits for a signal, or until `deadline` on `clock` when one is given.
    func wait(until deadline: Duration?, on clock: any AgentClock) async {
        guard let deadline else {
            await wait()
            return
        }
        if clock.now >= deadline { return }
        await wait(orUntil: { try? await clock.sleep(until: deadline) })
    }

    /// Drops a signal kept for the next wait, if one was sent.
    func dropKeptSignal() {
        state.withLock { $0.pending = false }
    }

    private func wait(orUntil sleep: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await sleep() }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
