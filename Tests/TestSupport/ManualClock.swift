@_spi(Package) import APIHealth

/// A clock that only moves when a test says so, so that time-dependent behaviour is tested without
/// sleeping.
public final class ManualClock: AgentClock, Sendable {
    private struct Sleeper {
        var deadline: Duration
        var continuation: CheckedContinuation<Void, any Error>
        var id: Int
    }

    private struct SleeperWatch {
        var deadline: Duration
        var continuation: CheckedContinuation<Bool, Never>
        var id: Int
    }

    private struct State {
        var now: Duration = .zero
        var sleepers: [Sleeper] = []
        var nextID = 0
        /// Tests waiting for someone to sleep until a deadline.
        var watches: [SleeperWatch] = []
    }

    private let state = Locked(State())

    public init() {}

    public var now: Duration { state.withLock { $0.now } }

    public func sleep(until deadline: Duration) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, watches) = state.withLock { state -> (Bool, [SleeperWatch]) in
                    if Task.isCancelled || deadline <= state.now { return (true, []) }
                    state.sleepers.append(Sleeper(deadline: deadline, continuation: continuation, id: id))
                    let watching = state.watches.filter { $0.deadline == deadline }
                    state.watches.removeAll { $0.deadline == deadline }
                    return (false, watching)
                }
                if resumeNow { continuation.resume() }
                for watch in watches { watch.continuation.resume(returning: true) }
            }
            try Task.checkCancellation()
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now += duration
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// The earliest deadline anyone sleeps until.
    public var nextDeadline: Duration? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    /// Waits until someone sleeps until `deadline` (told as it happens, not polled): the code under test
    /// has decided when it acts next, so moving time past `deadline` now wakes it, however late its
    /// decision came. Returns whether it happened within `timeout` of real time.
    public func waitForSleeper(until deadline: Duration, timeout: Duration = eventTimeout) async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timeOut = Task {
            try? await Task.sleep(for: timeout)
            self.endWatch(id, found: false)
        }
        defer { timeOut.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let found = state.withLock { state -> Bool in
                if state.sleepers.contains(where: { $0.deadline == deadline }) { return true }
                state.watches.append(SleeperWatch(deadline: deadline, continuation: continuation, id: id))
                return false
            }
            if found { continuation.resume(returning: true) }
        }
    }

    private func endWatch(_ id: Int, found: Bool) {
        let watch = state.withLock { state -> SleeperWatch? in
            guard let index = state.watches.firstIndex(where: { $0.id == id }) else { return nil }
            return state.watches.remove(at: index)
        }
        watch?.continuation.resume(returning: found)
    }
}
