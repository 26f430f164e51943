#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The monotonic time source the agent schedules flushes, retries and intervals with: a seam for the
/// package's tests, which inject a manual clock so that debounce, maximum age, backoff, `Retry-After`
/// and interval ends are checked without sleeping.
///
/// ```swift
/// let agent = try APIHealthAgent(configuration: configuration, logger: logger, clock: SystemAgentClock())
/// ```
package protocol AgentClock: Sendable {
    /// Time since an arbitrary, fixed origin; never goes backwards.
    var now: Duration { get }
    /// ``now`` to within a few milliseconds (either way), where reading it is cheaper: the time each
    /// recorded line is stamped with for batching (the debounce and the maximum age).
    var coarseNow: Duration { get }
    /// Suspends until ``now`` reaches `deadline`.
    ///
    /// - Parameter deadline: The reading of ``now`` to wait for.
    /// - Throws: `CancellationError` when the task is cancelled.
    func sleep(until deadline: Duration) async throws
}

extension AgentClock {
    /// ``now`` itself.
    package var coarseNow: Duration { now }
}

/// The real monotonic clock.
package struct SystemAgentClock: AgentClock {
    private let origin = ContinuousClock.now
    #if os(Linux)
    /// The coarse clock's reading at `origin`, in nanoseconds.
    private let coarseOrigin = Self.coarseNanoseconds()
    #endif

    /// A clock whose origin is now.
    package init() {}

    /// Time since the clock was made, from `ContinuousClock`.
    package var now: Duration { ContinuousClock.now - origin }

    #if os(Linux)
    /// The kernel's coarse monotonic clock (its last tick, one to ten milliseconds old): read
    /// without asking the hardware for the time, a fraction of the cost of ``now``.
    package var coarseNow: Duration { .nanoseconds(Self.coarseNanoseconds() &- coarseOrigin) }

    private static func coarseNanoseconds() -> Int64 {
        var reading = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &reading)
        return Int64(reading.tv_sec) &* 1_000_000_000 &+ Int64(reading.tv_nsec)
    }
    #endif

    /// Suspends until ``now`` reaches `deadline`.
    ///
    /// - Parameter deadline: The reading of ``now`` to wait for.
    /// - Throws: `CancellationError` when the task is cancelled.
    package func sleep(until deadline: Duration) async throws {
        try await Task.sleep(until: origin + deadline, clock: .continuous)
    }
}
