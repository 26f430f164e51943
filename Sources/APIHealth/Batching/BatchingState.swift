import LineProtocol

/// One destination's view of the pending batches: its cursor (the batches with its bit still set),
/// its retry schedule, its backlog against its own cap, and its counters.
struct DestinationCursor {
    /// No send before this (the destination's backoff, or a `Retry-After`).
    var retryNotBefore: Duration?
    /// Sends in a row that failed.
    var failedAttempts = 0
    /// The batch being sent now: joins leave it alone.
    var inFlight: String?
    /// Bytes and lines of the batches it still needs: its backlog, kept within `maximumPendingBytes`.
    var pendingBytes = 0
    var pendingLines = 0
    var pendingBatches = 0
    let maximumPendingBytes: Int
    var counters = DestinationMetrics()
}

/// The pending batches as a plain value: events in, actions out. Every change is a ``BatchingEvent``
/// given to ``handle(_:)`` (a recorded line, the one event that writes in place, to
/// ``record(_:series:now:afterClose:)``), and comes back as one ``BatchingAction``: the work to do outside the
/// lock (gzip, spool files, a join, a split, a send) and the loops to wake. ``PendingBatches`` holds
/// the state behind the lock `record` takes and runs the actions after releasing it, so recording never
/// waits for the disk, gzip or the network; the tests drive the state alone, with no disk or network.
///
/// Every batch goes to every destination: each destination has its own cursor over the same batches
/// (a bit per batch), its own retry schedule and its own cap, so a destination that is down keeps its
/// backlog within its cap and never delays or drops what another gets. A batch leaves when no
/// destination needs it any more. A batch's own life is ``PendingBatch/Stage``.
///
/// Invariants (checked by the property tests), per destination: every recorded line is pending,
/// written, dropped, rejected or expired, each once; batches go out in the order their lines were
/// recorded; its backlog stays within its cap but for the one batch being filled.
struct BatchingState {
    // The stored state is changed only by `handle(_:)` and `record(_:series:now:afterClose:)` (and the helpers
    // they call, in this file and its extensions); everything else reads it.
    var batches: [PendingBatch] = []
    var nextSequence: UInt64 = 1
    /// Bytes of line protocol held for any destination.
    var pendingBytes = 0
    /// The agent's own counters; what destinations did is in their cursors.
    var metrics = AgentMetrics()
    var recentInstants: RecentInstants
    var isClosed = false
    /// Points offered after intake closed (a producer still recording after the agent stopped).
    var droppedAfterClose: UInt64 = 0
    /// Whether the batches are mirrored in a spool directory.
    var hasSpool: Bool
    let limits: APIHealthConfiguration.Batching
    var destinations: [DestinationCursor]
    /// One bit per destination.
    let allDestinations: UInt64
    /// Spool files to remove, for the spool worker (never a recording thread).
    var spoolRemovals: [String] = []
    /// The first spool failure not yet reported to the agent's logger.
    var unreportedSpoolFailure: String?
    var spoolFailureReported = false
    /// Emptied line buffers with room for a whole batch, reused for new batches so their pages are not
    /// faulted in anew (at most ``spareBufferLimit``).
    var spareBuffers: [[UInt8]] = []
    /// The capacity a new batch's buffer gets: a full batch and the line that overflows it.
    let bufferCapacity: Int
    static let spareBufferLimit = 2
    /// Destinations one agent ships to at most (a bit each).
    static let maximumDestinations = 64

    /// The state for `destinationCaps.count` destinations (at least one), each with its own cap.
    init(
        limits: APIHealthConfiguration.Batching,
        precision: Precision,
        hasSpool: Bool,
        destinationCaps: [Int]
    ) {
        self.limits = limits
        self.hasSpool = hasSpool
        recentInstants = RecentInstants(precision: precision)
        bufferCapacity = min(limits.maximumBytes, 16 << 20) + 64 * 1_024
        let caps = Array(destinationCaps.prefix(Self.maximumDestinations))
        destinations = (caps.isEmpty ? [limits.maximumPendingBytes] : caps).map {
            DestinationCursor(maximumPendingBytes: $0)
        }
        allDestinations = destinations.count == 64 ? ~0 : (1 << UInt64(destinations.count)) - 1
    }

    // MARK: Events

    /// Applies `event` and says what to do about it outside the lock.
    mutating func handle(_ event: BatchingEvent) -> BatchingAction {
        switch event {
        case .pointsRepaired(let points):
            metrics.pointsRepaired += UInt64(points)
            return BatchingAction()
        case .pointInvalid:
            metrics.pointsInvalid += 1
            return BatchingAction()
        case .lineInvalid:
            // As a line would have been, had it been valid: dropped once intake has closed.
            if isClosed {
                countDroppedAfterClose()
            } else {
                metrics.pointsInvalid += 1
            }
            return BatchingAction()
        case .requestFiltered:
            metrics.requestsFiltered += 1
            return BatchingAction()
        case .pointDroppedAfterClose:
            countDroppedAfterClose()
            return BatchingAction()
        case .flushDue(let now, let jitter):
            return BatchingAction(.wait(until: sealDue(now: now, jitter: jitter)))
        case .flushRequested:
            sealOpenBatch()
            return BatchingAction(wakeups: .shippers)
        case .intakeClosed:
            close()
            // The spool worker's last round writes what is left through at once, whatever its beat.
            return BatchingAction(wakeups: [.shippers, .spoolWorker])
        case .sendWanted(let destination, let now, let openDeadline):
            return nextSend(for: destination, now: now, openDeadline: openDeadline)
        case .joined(let plan, let lines, let written, let failure):
            joined(plan, lines: lines, written: written, failure: failure)
            return BatchingAction(wakeups: .spoolWorker)
        case .bodyWanted(let segment):
            guard let batch = batches.first(where: { $0.segment == segment }) else { return BatchingAction() }
            if let body = batch.body { return BatchingAction(.useBody(body)) }
            return BatchingAction(.makeBody(segment: segment, lines: batch.bytes))
        case .waitingBodyWanted:
            guard let waiting = nextWaitingWithoutBody() else { return BatchingAction() }
            return BatchingAction(.makeBody(segment: waiting.segment, lines: waiting.lines))
        case .bodyMade(let segment, let body, let linesClamped):
            metrics.pointsRepaired += UInt64(linesClamped)
            keepBody(body, of: segment)
            return BatchingAction(.useBody(body))
        case .delivered(let segment, let destination, let sentBytes, let compressedBytes):
            delivered(segment, to: destination, sentBytes: sentBytes, compressedBytes: compressedBytes)
            return BatchingAction(wakeups: [.spoolWorker, .batchesLeft])
        case .refused(let segment, let destination, let reason, let lines):
            return refused(segment, by: destination, reason: reason, lines: lines)
        case .splitWanted(let segment):
            guard let batch = batches.first(where: { $0.segment == segment }) else { return BatchingAction() }
            return BatchingAction(.split(segment: segment, contents: batch.contents, lineCount: batch.lineCount))
        case .split(let segment, let destination, let halves, let names, let written, let failure):
            split(segment, for: destination, into: halves, names: names, written: written, failure: failure)
            return BatchingAction(wakeups: .spoolWorker)
        case .sendFailed(let segment, let destination, let notBefore, let now, let error, let retryLimit):
            guard
                failed(segment, for: destination, notBefore: notBefore, now: now, error: error, retryLimit: retryLimit)
            else {
                return refused(
                    segment,
                    by: destination,
                    reason: "still failing after the retry limit: \(error)",
                    lines: .expired
                )
            }
            return BatchingAction()
        case .retryWaitsCleared:
            for index in destinations.indices { destinations[index].retryNotBefore = nil }
            return BatchingAction(wakeups: .shippers)
        case .spoolRoundStarted:
            let work = takeSpoolWork()
            return BatchingAction(work.isEmpty ? .none : .writeSpool(work))
        case .spoolRoundFinished(let progress):
            guard let message = spoolWritten(progress) else { return BatchingAction() }
            return BatchingAction(.reportSpoolFailure(message))
        case .spoolFailed(let error):
            countSpoolFailure(error)
            return BatchingAction()
        case .restored(let result):
            for failure in result.failures { countSpoolFailure(failure) }
            restored(result.batches, sequencesAfter: result.highestSequence, linesLeftOut: result.linesLeftOut)
            return BatchingAction(wakeups: .spoolWorker)
        case .spoolReleased:
            return BatchingAction(.lost(releaseSpool()))
        }
    }

    // MARK: Recording

    /// A line, encoded outside the lock: its series (``RecentInstants/seriesID(_:)`` of its key) is
    /// given an instant it has not used, and the line is copied to the open batch (a batch is opened if
    /// none is); a line whose series has no free instant is dropped and counted. `afterClose`: a line
    /// recorded although intake has closed, in a sealed batch of its own (the agent's last health
    /// point, recorded once everything before it was sent, so that it reports the final counts).
    @inline(__always)
    mutating func record(_ line: EncodedLine, series: Int, now: Duration, afterClose: Bool = false) -> LineRecorded {
        guard afterClose else { return append(line, series: series, now: now) }
        isClosed = false
        var action = append(line, series: series, now: now)
        close()
        action.wakeups.insert(.shippers)
        return action
    }

    @inline(__always)
    private mutating func append(_ line: EncodedLine, series: Int, now: Duration) -> LineRecorded {
        var action = LineRecorded()
        if isClosed {
            countDroppedAfterClose()
            return action
        }
        // Loads the slots the claim reads while the line is copied (the tables are too large to stay
        // in the processor's cache beside the batches).
        var latest: LatestInstant?
        if let timestamp = line.timestamp { latest = recentInstants.prefetch(series: series, timestamp: timestamp) }
        if batches.isEmpty || batches[batches.count - 1].isSealed {
            batches.append(
                PendingBatch(
                    segment: SegmentName.sequence(takeSequence()),
                    bytes: newBuffer(),
                    lineCount: 0,
                    firstLineAt: now,
                    lastLineAt: now,
                    awaiting: allDestinations
                )
            )
            for index in destinations.indices { destinations[index].pendingBatches += 1 }
            action.wakeups.insert(.shippers)
        }
        let last = batches.count - 1
        let before = batches[last].bytes.count
        // In place: the batch's array is uniquely referenced, so the copy goes straight into it.
        batches[last].bytes.appendCopy(of: line.bytes)
        if let timestamp = line.timestamp, let latest {
            let instant = recentInstants.claim(series: series, timestamp: timestamp, latest: latest)
            if instant != timestamp { batches[last].bytes.removeLast(batches[last].bytes.count - before) }
            guard let instant else {
                // The series has no free instant near the point's time.
                metrics.pointsDropped += 1
                if batches[last].lineCount == 0 {
                    batches.removeLast()
                    for index in destinations.indices { destinations[index].pendingBatches -= 1 }
                }
                return action
            }
            if instant != timestamp { line.rewritingTimestamp(instant, into: &batches[last].bytes) }
        }
        action.accepted = true
        if !line.repairs.isEmpty { metrics.pointsRepaired += 1 }
        batches[last].lineCount += 1
        batches[last].lastLineAt = now
        let added = batches[last].bytes.count - before
        pendingBytes += added
        metrics.pointsRecorded += 1
        if batches[last].lineCount >= limits.maximumLines || batches[last].bytes.count >= limits.maximumBytes {
            seal(last)
            // Sealed by its size: the spool worker writes it through and makes its body now.
            action.wakeups.formUnion([.shippers, .spoolWorker])
        }
        // Last: dropping shifts the batches' indices.
        for index in destinations.indices {
            destinations[index].pendingBytes += added
            destinations[index].pendingLines += 1
            if destinations[index].pendingBytes > destinations[index].maximumPendingBytes,
                dropOldest(for: DestinationID(index: index))
            {
                action.wakeups.formUnion([.spoolWorker, .batchesLeft])
            }
        }
        return action
    }

    /// Counts a point dropped before it became a line (offered after intake closed).
    private mutating func countDroppedAfterClose() {
        metrics.pointsDropped += 1
        droppedAfterClose += 1
    }

    /// Drops the oldest batches `destination` still needs while its backlog is over its cap, keeping its
    /// newest; a batch no destination needs any more leaves (its spool file goes to the spool worker).
    /// The retry schedule is the destination's, so it stays.
    mutating func dropOldest(for destination: DestinationID) -> Bool {
        let cursor = destination.index
        var dropped = false
        var index = 0
        while destinations[cursor].pendingBytes > destinations[cursor].maximumPendingBytes
            && destinations[cursor].pendingBatches > 1 && index < batches.count
        {
            guard batches[index].awaiting & destination.bit != 0 else {
                index += 1
                continue
            }
            let batch = batches[index]
            release(index, from: destination)
            destinations[cursor].counters.pointsDropped += UInt64(batch.lineCount)
            dropped = true
            if batches.indices.contains(index), batches[index].segment == batch.segment { index += 1 }
        }
        return dropped
    }

    /// Clears `destination`'s bit on batch `index` and takes it off the destination's backlog; the batch
    /// leaves when no destination needs it, its file going to the spool worker. Returns whether it left.
    @discardableResult
    mutating func release(_ index: Int, from destination: DestinationID) -> Bool {
        let cursor = destination.index
        guard batches[index].awaiting & destination.bit != 0 else { return false }
        batches[index].awaiting &= ~destination.bit
        destinations[cursor].pendingBytes -= batches[index].lineBytes
        destinations[cursor].pendingLines -= batches[index].lineCount
        destinations[cursor].pendingBatches -= 1
        if destinations[cursor].inFlight == batches[index].segment { destinations[cursor].inFlight = nil }
        guard batches[index].awaiting == 0 else { return false }
        var batch = batches.remove(at: index)
        pendingBytes -= batch.lineBytes
        if hasSpool { spoolRemovals.append(batch.segment) }
        reuse(&batch.bytes)
        return true
    }

    mutating func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    // MARK: Sealing

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    private mutating func sealDue(now: Duration, jitter: Duration) -> Duration? {
        guard let last = batches.indices.last, !batches[last].isSealed else { return nil }
        let batch = batches[last]
        let due = min(batch.lastLineAt + limits.flushDelay, batch.firstLineAt + limits.maximumAge) + jitter
        if isClosed || now >= due {
            seal(last)
            return nil
        }
        return due
    }

    /// Seals the open batch now (`flush()` and shutdown).
    private mutating func sealOpenBatch() {
        if let last = batches.indices.last { seal(last) }
    }

    /// Stops intake: later lines are dropped and counted. The open batch is sealed.
    private mutating func close() {
        isClosed = true
        sealOpenBatch()
    }

    /// Seals batch `index` and gives back the room reserved for it to grow when that is more than an
    /// eighth of its bytes (a batch sealed by its size has little left; one sealed early, by the flush
    /// delay, has most of it), so pending memory follows the pending cap.
    private mutating func seal(_ index: Int) {
        guard !batches[index].isSealed else { return }
        batches[index].stage = .sealed
        var bytes = batches[index].bytes
        if bytes.capacity - bytes.count > bytes.count / 8 {
            batches[index].bytes = []
            batches[index].bytes = Self.exactCopy(bytes[...])
            reuse(&bytes)
        }
    }

    // MARK: Reading

    /// Whether `destination` has nothing left to send.
    func isDrained(for destination: DestinationID) -> Bool { destinations[destination.index].pendingBatches == 0 }

    /// The counters, with what is pending now: the destinations' summed, and each one's.
    var currentMetrics: AgentMetrics {
        var metrics = metrics
        metrics.pendingLines = batches.reduce(0) { $0 + $1.lineCount }
        metrics.pendingBytes = pendingBytes
        metrics.destinations = destinations.map { cursor in
            var counters = cursor.counters
            counters.pendingLines = cursor.pendingLines
            counters.pendingBytes = cursor.pendingBytes
            return counters
        }
        for cursor in destinations {
            metrics.pointsWritten += cursor.counters.pointsWritten
            metrics.pointsDropped += cursor.counters.pointsDropped
            metrics.pointsRejected += cursor.counters.pointsRejected
            metrics.pointsExpired += cursor.counters.pointsExpired
            metrics.retries += cursor.counters.retries
            metrics.batchesWritten += cursor.counters.batchesWritten
            metrics.bytesBeforeGzip += cursor.counters.bytesBeforeGzip
            metrics.bytesAfterGzip += cursor.counters.bytesAfterGzip
        }
        metrics.lastError = destinations.lazy.compactMap { $0.counters.lastError }.first
        return metrics
    }

    /// Memory held by the batches' lines and bodies and the spare buffers, spare capacity included.
    var reservedBytes: Int {
        batches.reduce(0) { $0 + $1.bytes.capacity + ($1.body?.capacity ?? 0) }
            + spareBuffers.reduce(0) { $0 + $1.capacity }
    }
}
