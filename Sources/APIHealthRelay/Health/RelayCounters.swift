/// What the relay has done since it started: the counts its health point carries.
package struct RelayCounters: Sendable, Hashable {
    /// Write requests answered.
    package var requests: UInt64 = 0
    /// Lines taken and handed to the agent to forward.
    package var linesAccepted: UInt64 = 0
    /// Lines refused, by reason (for a whole write: the lines it held; a 401 or 413 counts its request).
    package var refused: [Refusal: UInt64] = [:]
    /// Write requests answered 429.
    package var requestsThrottled: UInt64 = 0

    package init() {}

    /// Lines refused for any reason of a single line.
    package var linesRefused: UInt64 { Refusal.lineReasons.reduce(0) { $0 + (refused[$1] ?? 0) } }
}
