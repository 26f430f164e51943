#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LineProtocol

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
    /// The device's wall clock (`CLOCK_REALTIME`), to the nanosecond: what the agent stamps points with,
    /// before ``ClockCorrection`` corrects it.
    var wallNow: Timestamp { get }
    /// Whether ``wallNow`` and ``now`` run together, so that a change of their difference is a step of
    /// the wall clock (``ClockCorrection`` watches for it); `false` (the default) for a clock whose
    /// monotonic time is moved by hand.
    var wallRunsWithMonotonic: Bool { get }
    /// Suspends until ``now`` reaches `deadline`.
    ///
    /// - Parameter deadline: The reading of ``now`` to wait for.
    /// - Throws: `CancellationError` when the task is cancelled.
    func sleep(until deadline: Duration) async throws
}

extension AgentClock {
    /// ``now`` itself.
    package var coarseNow: Duration { now }

    /// The system's wall clock.
    package var wallNow: Timestamp { Timestamp.systemNow() }

    /// `false`: see the requirement.
    package var wallRunsWithMonotonic: Bool { false }
}

extension Timestamp {
    /// The system's wall clock (`CLOCK_REALTIME`), to the nanosecond.
    package static func systemNow() -> Timestamp {
        var reading = timespec()
        clock_gettime(CLOCK_REALTIME, &reading)
        return Timestamp(seconds: Int64(reading.tv_sec), nanoseconds: Int64(reading.tv_nsec))
    }

    /// Nanoseconds since the epoch (saturating past ±2⁶³ ns, about the year 2262).
    package var nanosecondsSinceEpoch: Int64 {
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(nanoseconds)
        return overflow2 ? .max : sum
    }

    /// The instant `nanoseconds` later (earlier when negative).
    package func adding(nanoseconds: Int64) -> Timestamp {
        nanoseconds == 0 ? self : Timestamp(seconds: seconds, nanoseconds: self.nanoseconds &+ nanoseconds)
    }
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

    /// `true`: the system's wall and monotonic clocks run together but when the wall clock is set.
    package var wallRunsWithMonotonic: Bool { true }

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
