/// One destination's view of the pending batches: its cursor (the batches with its bit still set),
/// its retry schedule, its backlog against its own cap, and its counters.
struct DestinationCursor {
    /// No send before this (the destination's backoff, or a `Retry-After`).
    fileprivate(set) var retryNotBefore: Duration?
    /// Sends in a row that failed.
    fileprivate(set) var failedAttempts = 0
    /// Bytes and lines of the batches it still needs: its backlog, kept within `maximumPendingBytes`.
    fileprivate(set) var pendingBytes = 0
    fileprivate(set) var pendingLines = 0
    fileprivate(set) var pendingBatches = 0
    let maximumPendingBytes: Int
    fileprivate(set) var counters = DestinationMetrics()

    /// Whether its backlog is over its cap with more than the batch being filled: the oldest of it goes.
    var mustDrop: Bool { pendingBytes > maximumPendingBytes && pendingBatches > 1 }
}

/// Every destination's cursor, one bit each in a batch's `awaiting` mask: their backlogs, retry schedules
/// and counters, changed only through what happened to a batch for a destination. The batches themselves
/// are ``BatchQueue``'s; ``BatchingState`` tells both.
struct DestinationCursors {
    /// Destinations one agent ships to at most (a bit each).
    static let maximum = 64

    private var cursors: [DestinationCursor]
    /// One bit per destination.
    let allBits: UInt64

    /// A cursor per cap (at most ``maximum``; one with `defaultCap` when `caps` is empty).
    init(caps: [Int], defaultCap: Int) {
        let caps = Array(caps.prefix(Self.maximum))
        cursors = (caps.isEmpty ? [defaultCap] : caps).map { DestinationCursor(maximumPendingBytes: $0) }
        allBits = cursors.count == 64 ? ~0 : (1 << UInt64(cursors.count)) - 1
    }

    /// Every cursor, in destination order.
    var all: [DestinationCursor] { cursors }

    /// Every destination.
    var ids: [DestinationID] { cursors.indices.map(DestinationID.init(index:)) }

    subscript(_ destination: DestinationID) -> DestinationCursor { cursors[destination.index] }

    // MARK: Backlogs

    /// A batch opened (`by` 1) or an empty one let go (`by` -1): every destination needs the open batch.
    @inline(__always)
    mutating func openBatches(by change: Int) {
        for index in cursors.indices { cursors[index].pendingBatches += change }
    }

    /// A line of `bytes` recorded for every destination. Returns the destinations now over their cap, one
    /// bit each.
    @inline(__always)
    mutating func addLine(bytes: Int) -> UInt64 {
        var over: UInt64 = 0
        for index in cursors.indices {
            cursors[index].pendingBytes += bytes
            cursors[index].pendingLines += 1
            if cursors[index].pendingBytes > cursors[index].maximumPendingBytes { over |= 1 << UInt64(index) }
        }
        return over
    }

    /// `batches` batches of `lines` lines and `bytes` bytes added to `destination`'s backlog (negative: taken off).
    mutating func add(batches: Int, lines: Int, bytes: Int, to destination: DestinationID) {
        cursors[destination.index].pendingBatches += batches
        cursors[destination.index].pendingLines += lines
        cursors[destination.index].pendingBytes += bytes
    }

    /// `count` batches each destination in `awaiting` needed were joined into one, `grown` bytes longer.
    mutating func joined(_ count: Int, awaiting: UInt64, grown: Int) {
        for index in cursors.indices where awaiting & (1 << UInt64(index)) != 0 {
            cursors[index].pendingBatches -= count - 1
            cursors[index].pendingBytes += grown
        }
    }

    // MARK: Answers

    /// `destination` stored a batch of `sentBytes` (`compressedBytes` sent): its retries are over.
    mutating func delivered(to destination: DestinationID, sentBytes: Int, compressedBytes: Int) {
        let cursor = destination.index
        cursors[cursor].counters.batchesWritten += 1
        cursors[cursor].counters.bytesBeforeGzip += UInt64(sentBytes)
        cursors[cursor].counters.bytesAfterGzip += UInt64(compressedBytes)
        cursors[cursor].counters.lastError = nil
        cursors[cursor].retryNotBefore = nil
        cursors[cursor].failedAttempts = 0
    }

    /// `lines` points `destination` stored.
    mutating func wrote(_ lines: Int, to destination: DestinationID) {
        cursors[destination.index].counters.pointsWritten += UInt64(lines)
    }

    /// `lines` points `destination` will never get: dropped past its cap.
    mutating func dropped(_ lines: Int, for destination: DestinationID) {
        cursors[destination.index].counters.pointsDropped += UInt64(lines)
    }

    /// `destination` refused (or, `expired`, stopped retrying) `refused` of a batch's `total` lines; the rest
    /// were stored (a partial write).
    mutating func refused(_ refused: UInt64, of total: Int, by destination: DestinationID, expired: Bool) {
        let cursor = destination.index
        if expired {
            cursors[cursor].counters.pointsExpired += refused
        } else {
            cursors[cursor].counters.pointsRejected += refused
        }
        cursors[cursor].counters.pointsWritten += UInt64(total) - refused
    }

    /// The last error `destination` answered or failed with.
    mutating func answered(_ error: String?, by destination: DestinationID) {
        cursors[destination.index].counters.lastError = error
    }

    /// A send to `destination` failed with `error`: no send before `notBefore`.
    mutating func failed(_ destination: DestinationID, error: String, notBefore: Duration) {
        let cursor = destination.index
        cursors[cursor].counters.retries += 1
        cursors[cursor].counters.lastError = error
        cursors[cursor].failedAttempts += 1
        cursors[cursor].retryNotBefore = notBefore
    }

    /// Every destination may send again now.
    mutating func clearRetryWaits() {
        for index in cursors.indices { cursors[index].retryNotBefore = nil }
    }

    // MARK: Reading

    /// `metrics` with what every destination did (summed, and each one's with its backlog).
    func adding(to metrics: AgentMetrics) -> AgentMetrics {
        var metrics = metrics
        metrics.destinations = cursors.map { cursor in
            var counters = cursor.counters
            counters.pendingLines = cursor.pendingLines
            counters.pendingBytes = cursor.pendingBytes
            return counters
        }
        for cursor in cursors {
            metrics.pointsWritten += cursor.counters.pointsWritten
            metrics.pointsDropped += cursor.counters.pointsDropped
            metrics.pointsRejected += cursor.counters.pointsRejected
            metrics.pointsExpired += cursor.counters.pointsExpired
            metrics.retries += cursor.counters.retries
            metrics.batchesWritten += cursor.counters.batchesWritten
            metrics.bytesBeforeGzip += cursor.counters.bytesBeforeGzip
            metrics.bytesAfterGzip += cursor.counters.bytesAfterGzip
        }
        metrics.lastError = cursors.lazy.compactMap { $0.counters.lastError }.first
        return metrics
    }
}
