/// Who waits for batches to leave (delivered, refused, dropped): ``PendingBatches`` keeps it under its
/// lock, beside the batches, and resumes the waiters after releasing it.
struct BatchDepartures {
    /// How many times batches left: a waiter that saw one count waits for the next.
    private(set) var count: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0

    /// Batches left: returns the waiters to resume.
    mutating func announce() -> [CheckedContinuation<Void, Never>] {
        count &+= 1
        defer { waiters = [:] }
        return Array(waiters.values)
    }

    /// A number for a new waiter.
    mutating func newWaiter() -> UInt64 {
        nextWaiter += 1
        return nextWaiter
    }

    /// Keeps `continuation` as waiter `id` until batches leave after `seen`; `false` if they already
    /// have (resume it now).
    mutating func wait(_ id: UInt64, after seen: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard count == seen else { return false }
        waiters[id] = continuation
        return true
    }

    /// Waiter `id` stops waiting (cancelled): returns its continuation to resume, if it was kept.
    mutating func cancel(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
        waiters.removeValue(forKey: id)
    }
}
