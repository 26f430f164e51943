import LineProtocol

/// One destination's view of the pending batches: its cursor (the batches with its bit still set),
/// its retry schedule, its backlog against its own cap, and its counters.
struct DestinationCursor {
    /// No send before this (the destination's backoff, or a `Retry-After`).
    var retryNotBefore: Duration?
    /// Sends in a row that failed.
    var failedAttempts = 0
    /// Bytes and lines of the batches it still needs: its backlog, kept within `maximumPendingBytes`.
    var pendingBytes = 0
    var pendingLines = 0
    var pendingBatches = 0
    let maximumPendingBytes: Int
    var counters = DestinationMetrics()

    /// A line of `bytes` recorded for it: returns whether its backlog is now over its cap.
    @inline(__always)
    mutating func add(line bytes: Int) -> Bool {
        pendingBytes += bytes
        pendingLines += 1
        return pendingBytes > maximumPendingBytes
    }
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
/// destination needs it any more. A batch's own life is ``PendingBatch/Life``: open, then sealed with
/// who still needs it and who sends it, its spool file, its body and its retries.
///
/// Invariants (checked by the property tests), per destination: every recorded line is pending,
/// written, dropped, rejected or expired, each once; batches go out in the order their lines were
/// recorded; its backlog stays within its cap but for the one batch being filled.
struct BatchingState {
    // The stored state is changed only by `handle(_:)` and `record(_:series:now:afterClose:)` and the
    // private helpers they call: the storage is private (what others read, `private(set)`), so the
    // compiler keeps that rule.
    private(set) var batches: [PendingBatch] = []
    private var nextSequence: UInt64 = 1
    /// The agent's own counters; what destinations did is in their cursors.
    private var metrics = AgentMetrics()
    private var recentInstants: RecentInstants
    private(set) var isClosed = false
    /// Whether the device clock's offset has been learned (``BatchingEvent/offsetLearned(nanoseconds:)``).
    private(set) var offsetLearned = false
    /// The precision lines are written in, to move their timestamps.
    private let precision: Precision
    /// When the last line was recorded: the open batch is sealed `flushDelay` after it.
    private var lastLineAt = Duration.zero
    /// Points offered after intake closed (a producer still recording after the agent stopped).
    private(set) var droppedAfterClose: UInt64 = 0
    /// Whether the batches are mirrored in a spool directory.
    private var hasSpool: Bool
    let limits: APIHealthConfiguration.Batching
    private(set) var destinations: [DestinationCursor]
    /// One bit per destination.
    let allDestinations: UInt64
    /// Spool files to remove, for the spool worker (never a recording thread).
    private var spoolRemovals: [String] = []
    /// The first spool failure not yet reported to the agent's logger.
    private var unreportedSpoolFailure: String?
    private var spoolFailureReported = false
    /// Emptied line buffers with room for a whole batch, reused for new batches so their pages are not
    /// faulted in anew (at most ``spareBufferLimit``).
    private var spareBuffers: [[UInt8]] = []
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
        self.precision = precision
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
        case .cacheKeysEvicted:
            metrics.cacheKeysEvicted += 1
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
            return BatchingAction(.makeBody(segment: segment, lines: batch.bytes, shift: batch.shift))
        case .waitingBodyWanted:
            guard let waiting = nextWaitingWithoutBody() else { return BatchingAction() }
            return BatchingAction(.makeBody(segment: waiting.segment, lines: waiting.lines, shift: waiting.shift))
        case .bodyMade(let segment, let body, let linesClamped, let restamped):
            metrics.pointsRepaired += UInt64(linesClamped)
            keepBody(body, of: segment, restamped: restamped)
            return BatchingAction(.useBody(body))
        case .offsetLearned(let nanoseconds):
            learnOffset(nanoseconds: nanoseconds)
            return BatchingAction()
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
        if batches.isEmpty || batches[batches.count - 1].isSealed {
            batches.append(PendingBatch(opening: SegmentName.sequence(takeSequence()), bytes: newBuffer(), now: now))
            for index in destinations.indices { destinations[index].pendingBatches += 1 }
            action.wakeups.insert(.shippers)
        }
        let last = batches.count - 1
        // One access to the open batch and the instants for the whole copy.
        guard
            let (added, full) = Self.copy(
                line,
                series: series,
                into: &batches[last],
                instants: &recentInstants,
                limits: limits
            )
        else {
            // The series has no free instant near the point's time.
            metrics.pointsDropped += 1
            if batches[last].lineCount == 0 {
                batches.removeLast()
                for index in destinations.indices { destinations[index].pendingBatches -= 1 }
            }
            return action
        }
        action.accepted = true
        lastLineAt = now
        if !line.repairs.isEmpty { metrics.pointsRepaired += 1 }
        metrics.pointsRecorded += 1
        if full {
            seal(last)
            // Sealed by its size: the spool worker writes it through and makes its body now.
            action.wakeups.formUnion([.shippers, .spoolWorker])
        }
        // Last: dropping shifts the batches' indices.
        for index in destinations.indices where destinations[index].add(line: added) {
            if dropOldest(for: DestinationID(index: index)) { action.wakeups.formUnion([.spoolWorker, .batchesLeft]) }
        }
        return action
    }

    /// Copies `line` into the open `batch`, its series given an instant it has not used (the
    /// line rewritten when that is not its own). Returns the bytes added, `nil` if the series has no
    /// free instant near the point's time (nothing is added); `full` when the batch is full within `limits`.
    @inline(__always)
    private static func copy(
        _ line: EncodedLine,
        series: Int,
        into batch: inout PendingBatch,
        instants: inout RecentInstants,
        limits: APIHealthConfiguration.Batching
    ) -> (added: Int, full: Bool)? {
        let before = batch.bytes.count
        // In place: the batch's array is uniquely referenced, so the copy goes straight into it.
        if let timestamp = line.timestamp {
            // Loads the slots the claim reads while the line is copied (the tables are too large to
            // stay in the processor's cache beside the batches).
            let latest = instants.prefetch(series: series, timestamp: timestamp)
            batch.bytes.appendCopy(of: line.bytes)
            let instant = instants.claim(series: series, timestamp: timestamp, latest: latest)
            if instant != timestamp {
                batch.bytes.removeLast(batch.bytes.count - before)
                guard let instant else { return nil }
                line.rewritingTimestamp(instant, into: &batch.bytes)
            }
        } else {
            batch.bytes.appendCopy(of: line.bytes)
        }
        batch.lineCount += 1
        let full = batch.lineCount >= limits.maximumLines || batch.bytes.count >= limits.maximumBytes
        return (batch.bytes.count - before, full)
    }

    /// Counts a point dropped before it became a line (offered after intake closed).
    private mutating func countDroppedAfterClose() {
        metrics.pointsDropped += 1
        droppedAfterClose += 1
    }

    /// Drops the oldest batches `destination` still needs while its backlog is over its cap, keeping its
    /// newest; a batch no destination needs any more leaves (its spool file goes to the spool worker).
    /// The retry schedule is the destination's, so it stays.
    private mutating func dropOldest(for destination: DestinationID) -> Bool {
        let cursor = destination.index
        var dropped = false
        var index = 0
        while destinations[cursor].pendingBytes > destinations[cursor].maximumPendingBytes
            && destinations[cursor].pendingBatches > 1 && index < batches.count
        {
            guard batches[index].awaits(destination.bit) else {
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
    private mutating func release(_ index: Int, from destination: DestinationID) -> Bool {
        let cursor = destination.index
        guard var sealed = batches[index].sealed, sealed.awaiting & destination.bit != 0 else { return false }
        sealed.awaiting &= ~destination.bit
        sealed.sending &= ~destination.bit
        batches[index].sealed = sealed
        destinations[cursor].pendingBytes -= batches[index].lineBytes
        destinations[cursor].pendingLines -= batches[index].lineCount
        destinations[cursor].pendingBatches -= 1
        guard sealed.awaiting == 0 else { return false }
        var batch = batches.remove(at: index)
        if hasSpool { spoolRemovals.append(batch.segment) }
        reuse(&batch.bytes)
        return true
    }

    private mutating func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    // MARK: Sealing

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    private mutating func sealDue(now: Duration, jitter: Duration) -> Duration? {
        guard let last = batches.indices.last, case .open(let firstLineAt, _) = batches[last].life else { return nil }
        let due = min(lastLineAt + limits.flushDelay, firstLineAt + limits.maximumAge) + jitter
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
        batches[index].seal(for: allDestinations)
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
        metrics.pendingBytes = batches.reduce(0) { $0 + $1.lineBytes }
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

// MARK: - Sending

extension BatchingState {
    /// The index of the oldest batch `destination` still needs.
    private func head(of destination: DestinationID) -> Int? {
        batches.firstIndex { $0.awaits(destination.bit) }
    }

    /// The oldest sealed batch `destination` needs if it may be sent at `now`, a join to make first,
    /// or how long to wait.
    private mutating func nextSend(
        for destination: DestinationID,
        now: Duration,
        openDeadline: Duration?
    ) -> BatchingAction {
        guard let index = head(of: destination), batches[index].isSealed else {
            return BatchingAction(.wait(until: openDeadline))
        }
        if let notBefore = destinations[destination.index].retryNotBefore, notBefore > now {
            return BatchingAction(.wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore))
        }
        if let plan = joinPlan(at: index) { return BatchingAction(.join(plan)) }
        batches[index].sealed?.sending |= destination.bit
        let head = batches[index]
        return BatchingAction(
            .send(segment: head.segment, body: head.body, lineCount: head.lineCount, lineBytes: head.lineBytes)
        )
    }

    /// Whether one of `batches` is being sent to a destination.
    private func isInFlight(_ batches: ArraySlice<PendingBatch>) -> Bool {
        batches.contains { ($0.sealed?.sending ?? 0) != 0 }
    }

    /// `destination`'s send of batch `segment` is over: the index of the batch, if it is still here.
    private mutating func stopSending(_ segment: String, to destination: DestinationID) -> Int? {
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return nil }
        batches[index].sealed?.sending &= ~destination.bit
        return index
    }

    /// The sealed batches after batch `start` that fit into it within the batch limits, needed by the
    /// same destinations and being sent to none, so a backlog (many small batches cut while the server
    /// was away) goes out in few requests.
    private mutating func joinPlan(at start: Int) -> MergePlan? {
        let awaiting = batches[start].awaiting
        func joinable(_ batch: PendingBatch) -> Bool {
            guard let sealed = batch.sealed else { return false }
            return sealed.joinable && sealed.awaiting == awaiting && (!hasSpool || batch.isSpoolSealed)
        }
        guard joinable(batches[start]) else { return nil }
        var end = start + 1
        var lines = batches[start].lineCount
        var size = batches[start].lineBytes
        while end < batches.count, joinable(batches[end]),
            lines + batches[end].lineCount <= limits.maximumLines,
            size + batches[end].lineBytes <= limits.maximumBytes
        {
            lines += batches[end].lineCount
            size += batches[end].lineBytes
            end += 1
        }
        guard end - start > 1, !isInFlight(batches[start..<end]) else { return nil }
        let sources = batches[start..<end]
        return MergePlan(
            sources: sources.map(\.segment),
            contents: sources.map(\.contents),
            segment: SegmentName.merged(last: sources[sources.endIndex - 1].segment, sequence: takeSequence()),
            lineCount: lines,
            lineBytes: size
        )
    }

    /// The join of `plan` is made (`lines`, written to the spool as a sealed file when `written`), or
    /// could not be (`nil`). It replaces its sources if they are still there, in a row, unchanged and
    /// being sent nowhere; otherwise (one was dropped or sent meanwhile) it is let go. Its sources'
    /// files, or its own, go to the spool worker.
    private mutating func joined(_ plan: MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?) {
        if let failure { countSpoolFailure(failure) }
        let start = batches.firstIndex { $0.segment == plan.sources[0] }
        let unchanged = start.map { start in
            batches.count - start >= plan.sources.count
                && zip(batches[start...], plan.sources).allSatisfy {
                    $0.segment == $1 && $0.awaiting == batches[start].awaiting
                }
                && !isInFlight(batches[start..<(start + plan.sources.count)])
        }
        guard let start, unchanged == true, let lines, !hasSpool || written else {
            if written { spoolRemovals.append(plan.segment) }
            // Sent as it is: a join that failed is not tried again for this batch.
            if let start { batches[start].sealed?.joinable = false }
            return
        }
        let range = start..<(start + plan.sources.count)
        var joined = PendingBatch(
            sealed: plan.segment,
            bytes: lines,
            lineCount: plan.lineCount,
            awaiting: batches[start].awaiting
        )
        joined.sealed?.failingSince = batches[range].compactMap { $0.sealed?.failingSince }.min()
        // Its lines are its sources' as they read (moved where they were to be moved).
        joined.stampedInThisRun = batches[range].allSatisfy { $0.stampedInThisRun && $0.shift == nil }
        // Lines moved to true time as they were joined may have changed length.
        let grown = lines.count - batches[range].reduce(0) { $0 + $1.lineBytes }
        for index in destinations.indices where joined.awaits(1 << UInt64(index)) {
            destinations[index].pendingBatches -= plan.sources.count - 1
            destinations[index].pendingBytes += grown
        }
        batches.replaceSubrange(range, with: [joined])
        if hasSpool { spoolRemovals += plan.sources }
    }

    /// The newest sealed batch behind the head without a body: the next one to compress.
    private func nextWaitingWithoutBody() -> (segment: String, lines: [UInt8], shift: TimestampShift?)? {
        guard batches.count > 1 else { return nil }
        for index in batches.indices.dropFirst().reversed() where batches[index].isSealed && batches[index].body == nil
        {
            return (batches[index].segment, batches[index].bytes, batches[index].shift)
        }
        return nil
    }

    /// Batch `segment`'s body is made: kept for its sends, and its lines let go once they are on disk. A body
    /// made before the clock's offset was learned, of lines it moves (`restamped` false), is not kept: the
    /// next send makes it again.
    private mutating func keepBody(_ body: [UInt8], of segment: String, restamped: Bool) {
        guard let index = batches.firstIndex(where: { $0.segment == segment }), batches[index].isSealed,
            batches[index].body == nil, batches[index].shift == nil || restamped
        else { return }
        batches[index].sealed?.body = body
        releaseLines(index)
    }

    /// `destination` stored batch `segment`.
    private mutating func delivered(
        _ segment: String,
        to destination: DestinationID,
        sentBytes: Int,
        compressedBytes: Int
    ) {
        let cursor = destination.index
        destinations[cursor].counters.batchesWritten += 1
        destinations[cursor].counters.bytesBeforeGzip += UInt64(sentBytes)
        destinations[cursor].counters.bytesAfterGzip += UInt64(compressedBytes)
        destinations[cursor].counters.lastError = nil
        destinations[cursor].retryNotBefore = nil
        destinations[cursor].failedAttempts = 0
        guard let index = stopSending(segment, to: destination), batches[index].awaits(destination.bit) else { return }
        destinations[cursor].counters.pointsWritten += UInt64(batches[index].lineCount)
        batches[index].sealed?.failingSince = nil
        release(index, from: destination)
    }

    /// `destination` refused batch `segment` for good (or it failed past the retry limit; for a partial
    /// write, `reason` lists the refused lines): the batch
    /// leaves its cursor and is counted, the refused lines as refused (the rest were stored: a partial
    /// write). Asks for its lines to be copied to `rejected/` outside the lock (not when the batch is
    /// gone or there is no spool).
    private mutating func refused(
        _ segment: String,
        by destination: DestinationID,
        reason: String,
        lines: RefusedLines
    ) -> BatchingAction {
        let cursor = destination.index
        if case .numbered = lines {
            destinations[cursor].counters.lastError = "partial write: \(reason)"
        } else {
            destinations[cursor].counters.lastError = reason
        }
        guard let index = stopSending(segment, to: destination), batches[index].awaits(destination.bit) else {
            return BatchingAction(wakeups: .batchesLeft)
        }
        let batch = batches[index]
        let refusedCount: Int
        var only: [Int: String]?
        switch lines {
        case .all, .expired: refusedCount = batch.lineCount
        case .count(let count): refusedCount = count
        case .numbered(let numbered):
            refusedCount = numbered.count
            only = numbered
        }
        let refused = UInt64(min(refusedCount, batch.lineCount))
        if case .expired = lines {
            destinations[cursor].counters.pointsExpired += refused
        } else {
            destinations[cursor].counters.pointsRejected += refused
        }
        // A partial write (InfluxDB 1.x answers `dropped=N`, InfluxDB 3 lists the lines): the rest are stored.
        destinations[cursor].counters.pointsWritten += UInt64(batch.lineCount) - refused
        let left = release(index, from: destination)
        guard hasSpool else { return BatchingAction(wakeups: .batchesLeft) }
        if left, let removal = spoolRemovals.lastIndex(of: segment) {
            // Removed with the copy, which must be written first.
            spoolRemovals.remove(at: removal)
        }
        return BatchingAction(
            .writeRejected(segment: segment, contents: batch.contents, reason: reason, removesFile: left, only: only),
            wakeups: .batchesLeft
        )
    }

    /// `destination` found batch `segment` too large: it gets the `halves` (written to the spool as
    /// `names` when `written`) in its place, never joined again, and the batch leaves its cursor (other
    /// destinations still get it whole). If the batch is gone meanwhile, the halves' files are let go.
    private mutating func split(
        _ segment: String,
        for destination: DestinationID,
        into halves: SplitHalves,
        names: (first: String, second: String),
        written: Bool,
        failure: SpoolError?
    ) {
        if let failure { countSpoolFailure(failure) }
        let cursor = destination.index
        let bit = destination.bit
        guard let index = stopSending(segment, to: destination), batches[index].awaits(bit) else {
            if written && !batches.contains(where: { $0.segment == names.first }) {
                spoolRemovals += [names.first, names.second]
            }
            return
        }
        let original = batches[index]
        var originalIndex = index
        if index >= 2, batches[index - 2].segment == names.first, batches[index - 1].segment == names.second {
            // Another destination split it the same way: the halves are shared.
            batches[index - 2].sealed?.awaiting |= bit
            batches[index - 1].sealed?.awaiting |= bit
        } else {
            originalIndex += 2
            // Unwritten halves are sealed on disk by the next round, which counts the failure.
            func half(_ segment: String, _ bytes: [UInt8], lines: Int) -> PendingBatch {
                var half = PendingBatch(sealed: segment, bytes: bytes, lineCount: lines, awaiting: bit)
                half.sealed?.joinable = false
                half.sealed?.failingSince = original.sealed?.failingSince
                // Cut from its lines as they read (moved where they were to be moved).
                half.stampedInThisRun = original.stampedInThisRun && original.shift == nil
                if !written && hasSpool { half.sealed?.spool = .writing(bytes: bytes.count) }
                return half
            }
            let first = half(names.first, halves.first, lines: halves.firstLines)
            let second = half(names.second, halves.second, lines: halves.secondLines)
            batches.insert(contentsOf: [first, second], at: index)
        }
        destinations[cursor].pendingBytes += halves.first.count + halves.second.count
        destinations[cursor].pendingLines += halves.firstLines + halves.secondLines
        destinations[cursor].pendingBatches += 2
        let left = release(originalIndex, from: destination)
        // The whole batch stays on disk when the halves could not be written; they still go from memory.
        if left && hasSpool && !written, let removal = spoolRemovals.lastIndex(of: original.segment) {
            spoolRemovals.remove(at: removal)
        }
    }

    /// A send of batch `segment` to `destination` failed: the destination waits until `notBefore`.
    /// Returns `false` when the batch has been failing for longer than `retryLimit` (it is then refused
    /// as expired).
    private mutating func failed(
        _ segment: String,
        for destination: DestinationID,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?
    ) -> Bool {
        let cursor = destination.index
        destinations[cursor].counters.retries += 1
        destinations[cursor].counters.lastError = error
        destinations[cursor].failedAttempts += 1
        destinations[cursor].retryNotBefore = notBefore
        guard let index = stopSending(segment, to: destination) else { return true }
        let since = batches[index].sealed?.failingSince ?? now
        batches[index].sealed?.failingSince = since
        if let retryLimit, now - since > retryLimit { return false }
        return true
    }
}

// MARK: - Spool

extension BatchingState {
    /// What the spool worker writes this round: the bytes recorded since the last one, the seals of
    /// sealed batches, and the files to remove.
    private mutating func takeSpoolWork() -> SpoolWork {
        var work = SpoolWork()
        guard hasSpool else { return work }
        for batch in batches where batch.spooledBytes < batch.bytes.count || (batch.isSealed && !batch.isSpoolSealed) {
            work.appends.append(
                SpoolWork.Append(
                    segment: batch.segment,
                    bytes: Array(batch.bytes[batch.spooledBytes...]),
                    end: batch.bytes.count,
                    seals: batch.isSealed
                )
            )
        }
        swap(&work.removals, &spoolRemovals)
        return work
    }

    /// The spool worker's round is done. Returns the first spool failure, once, for the log.
    private mutating func spoolWritten(_ progress: SpoolProgress) -> String? {
        for item in progress.written {
            guard let index = batches.firstIndex(where: { $0.segment == item.segment }) else { continue }
            batches[index].spooled(to: item.end, sealed: item.sealed)
            if item.sealed { releaseLines(index) }
        }
        for failure in progress.failures { countSpoolFailure(failure) }
        guard let message = unreportedSpoolFailure else { return nil }
        unreportedSpoolFailure = nil
        spoolFailureReported = true
        return message
    }

    /// Counts a failed spool operation; only the first one is kept for the log.
    private mutating func countSpoolFailure(_ error: any Error) {
        metrics.spoolWriteErrors += 1
        if !spoolFailureReported && unreportedSpoolFailure == nil { unreportedSpoolFailure = "\(error)" }
    }

    /// The device clock's offset is known, for the first time: every batch whose lines can still be moved
    /// (open, or sealed and neither being sent nor held only as its body) moves the lines it holds now, all
    /// stamped on the device's clock, to true time when its body is made (a body made already is made
    /// again); lines recorded from now on are stamped in true time. What this run recorded and cannot be
    /// moved — sent, being sent, dropped, held only compressed — is counted in
    /// ``AgentMetrics/pointsOnDeviceClock``; a batch a previous run left (stamped on that run's clock,
    /// corrected or not) is left as it is. The rewriting itself is done outside the lock.
    private mutating func learnOffset(nanoseconds: Int64) {
        guard !offsetLearned else { return }
        offsetLearned = true
        var moved: UInt64 = 0
        for index in batches.indices where batches[index].lineCount > 0 && batches[index].stampedInThisRun {
            if let sealed = batches[index].sealed {
                guard sealed.sending == 0, batches[index].linesOnlyInBody == nil else { continue }
                batches[index].sealed?.body = nil
            }
            batches[index].shift = TimestampShift(
                bytes: batches[index].bytes.count,
                nanoseconds: nanoseconds,
                precision: precision
            )
            moved += UInt64(batches[index].lineCount)
        }
        metrics.pointsOnDeviceClock = metrics.pointsRecorded > moved ? metrics.pointsRecorded - moved : 0
    }

    /// Lets batch `index`'s lines go once its body holds them and they are on disk (or there is no
    /// spool); their buffer is reused.
    private mutating func releaseLines(_ index: Int) {
        let batch = batches[index]
        guard batch.body != nil, batch.linesOnlyInBody == nil,
            !hasSpool || (batch.isSpoolSealed && batch.spooledBytes == batch.bytes.count)
        else { return }
        batches[index].sealed?.linesOnlyInBody = batch.bytes.count
        var lines = batches[index].bytes
        batches[index].bytes = []
        reuse(&lines)
    }

    /// Batches a previous run left in the spool, ahead of anything recorded, for every destination;
    /// `nextSequence` continues after the highest sequence found.
    private mutating func restored(_ restored: [PendingBatch], sequencesAfter highest: UInt64, linesLeftOut: Int) {
        nextSequence = max(nextSequence, highest + 1)
        var restored = restored
        for index in restored.indices {
            restored[index].sealed?.awaiting = allDestinations
            restored[index].stampedInThisRun = false
        }
        batches.insert(contentsOf: restored, at: 0)
        let bytes = restored.reduce(0) { $0 + $1.lineBytes }
        let lines = restored.reduce(0) { $0 + $1.lineCount }
        metrics.spoolLinesLeftOut += UInt64(linesLeftOut)
        for index in destinations.indices {
            destinations[index].pendingBytes += bytes
            destinations[index].pendingLines += lines
            destinations[index].pendingBatches += restored.count
            if destinations[index].pendingBytes > destinations[index].maximumPendingBytes {
                _ = dropOldest(for: DestinationID(index: index))
            }
        }
    }

    /// The spool is let go after shutdown: counts what is neither delivered nor on disk as lost.
    private mutating func releaseSpool() -> UInt64 {
        var lost: UInt64 = 0
        for batch in batches {
            if !hasSpool || batch.spooledBytes == 0 {
                lost += UInt64(batch.lineCount)
            } else if batch.spooledBytes < batch.bytes.count {
                batch.bytes[batch.spooledBytes...].withUnsafeBufferPointer { buffer in
                    for line in LineSplitter(buffer) where !line.range.isEmpty { lost += 1 }
                }
            }
        }
        metrics.pointsLost += lost
        hasSpool = false
        spoolRemovals = []
        return lost
    }

    // MARK: Buffers

    /// Keeps `buffer`, emptied, for a later batch if it has room for a whole one and fewer than
    /// ``spareBufferLimit`` are kept.
    private mutating func reuse(_ buffer: inout [UInt8]) {
        guard buffer.capacity >= bufferCapacity, spareBuffers.count < Self.spareBufferLimit else { return }
        buffer.removeAll(keepingCapacity: true)
        spareBuffers.append(buffer)
        buffer = []
    }

    /// An empty buffer with room for a whole batch and the line that overflows it.
    private mutating func newBuffer() -> [UInt8] {
        if let spare = spareBuffers.popLast() { return spare }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(bufferCapacity)
        return bytes
    }

    /// A new array holding exactly `bytes`, without spare capacity.
    private static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            _ = buffer.initialize(fromContentsOf: bytes)
            count = bytes.count
        }
    }
}
