@_spi(Package) import APIHealth
import LineProtocol

/// The system's clocks, but for a wall clock set `shift` away from true time: a phone whose clock runs
/// ahead (or behind), for the clock correction's tests.
public struct ShiftedWallClock: AgentClock {
    private let system = SystemAgentClock()
    private let shift: Int64

    /// - Parameter shift: How far the wall clock is ahead of true time (behind when negative).
    public init(ahead shift: Duration) {
        self.shift = shift.components.seconds * 1_000_000_000 + shift.components.attoseconds / 1_000_000_000
    }

    public var now: Duration { system.now }
    public var coarseNow: Duration { system.coarseNow }
    public var wallNow: Timestamp { Timestamp.systemNow().adding(nanoseconds: shift) }

    public func sleep(until deadline: Duration) async throws {
        try await system.sleep(until: deadline)
    }
}
