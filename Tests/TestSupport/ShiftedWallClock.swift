@_spi(Package) import APIHealth
import LineProtocol

/// The system's clocks, but for a wall clock set `shift` away from true time: a phone whose clock runs
/// ahead (or behind), for the clock correction's tests; ``step(by:)`` sets it as a user or the network
/// would.
public struct ShiftedWallClock: AgentClock {
    private let system = SystemAgentClock()
    /// How far the wall clock is ahead of true time, in nanoseconds.
    private let shift: Locked<Int64>

    /// - Parameter shift: How far the wall clock is ahead of true time (behind when negative).
    public init(ahead shift: Duration) {
        self.shift = Locked(Self.nanoseconds(shift))
    }

    public var now: Duration { system.now }
    public var coarseNow: Duration { system.coarseNow }
    public var wallNow: Timestamp { Timestamp.systemNow().adding(nanoseconds: shift.withLock { $0 }) }
    public var wallRunsWithMonotonic: Bool { true }

    /// Sets the wall clock `change` later (earlier when negative) at once, its monotonic clock unmoved.
    public func step(by change: Duration) {
        shift.withLock { $0 += Self.nanoseconds(change) }
    }

    public func sleep(until deadline: Duration) async throws {
        try await system.sleep(until: deadline)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}
