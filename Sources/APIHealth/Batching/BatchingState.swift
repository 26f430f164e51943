import LineProtocol

/// The pending batches as a plain value: events in, actions out. Every change is a ``BatchingEvent``
/// given to ``handle(_:)`` (a recorded line, the one event that writes in place, to
/// ``record(_:series:now:afterClose:)``), and comes back as one ``BatchingAction``: the work to do outside the
/// lock (gzip, spool files, a join, a split, a send) and the loops to wake. ``PendingBatches`` holds
/// the state behind the lock `record` takes and runs the actions after releasing it, so recording never
/// waits for the disk, gzip or the network; the tests drive the state alone, with no disk or network.
///
/// Every batch goes to every destination: each has its own cursor over the same batches (a bit per batch),
/// retry schedule and cap, so a destination that is down never delays or drops what another gets. A batch
/// leaves when no destination needs it any more; its own life is ``PendingBatch/Life``. The state is three
/// parts with storage of their own: the batches (``BatchQueue``), the destinations' cursors
/// (``DestinationCursors``) and what the spool worker owes the disk (``SpoolLedger``); this type turns each
/// event into what it means for each part, and keeps the agent's counters and each series' recent instants.
///
/// Invariants (checked by the property tests), per destination: every recorded line is pending, written,
/// dropped, rejected or expired, each once; batches go out in recording order; the backlog stays within its
/// cap but for the one batch being filled.
struct BatchingState {
    // The stored state is changed only by `handle(_:)` and `record(_:series:now:afterClose:)` and the
    // private helpers they call, each part's only through its own methods.
    private var queue: BatchQueue
    private var cursors: DestinationCursors
    private var ledger: SpoolLedger
    /// The agent's own counters, less what is pending (``currentMetrics``); destinations' in their cursors.
    private(set) var metrics = AgentMetrics()
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
    let limits: APIHealthConfiguration.Batching

    /// The state for `destinationCaps.count` destinations (at least one), each with its own cap.
    init(
        limits: APIHealthConfiguration.Batching,
        precision: Precision,
        hasSpool: Bool,
        destinationCaps: [Int]
    ) {
        self.limits = limits
        self.precision = precision
        queue = BatchQueue(bufferCapacity: min(limits.maximumBytes, 16 << 20) + 64 * 1_024)
        cursors = DestinationCursors(caps: destinationCaps, defaultCap: limits.maximumPendingBytes)
        ledger = SpoolLedger(isActive: hasSpool)
        recentInstants = RecentInstants(precision: precision)
    }

    /// The pending batches, oldest first.
    var batches: [PendingBatch] { queue.batches }

    /// Every destination's cursor.
    var destinations: [DestinationCursor] { cursors.all }

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
        case .pointDroppedAfterClose:
            countDroppedAfterClose()
            return BatchingAction()
        case .counted(let counter): metrics[keyPath: counter] &+= 1
        case .pathsOverflowed(let count): metrics.pathsOverflowed += count
        case .aggregates(let counts): metrics.set(counts)
        case .flushDue(let now, let jitter):
            return BatchingAction(.wait(until: sealDue(now: now, jitter: jitter)))
        case .flushRequested:
            queue.sealLast(for: cursors.allBits)
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
            guard let index = queue.index(of: segment) else { return BatchingAction() }
            let batch = queue.batches[index]
            if let body = batch.body { return BatchingAction(.useBody(body)) }
            return BatchingAction(.makeBody(segment: segment, lines: batch.bytes, shift: batch.shift))
        case .waitingBodyWanted:
            guard let waiting = queue.nextWaitingWithoutBody() else { return BatchingAction() }
            return BatchingAction(.makeBody(segment: waiting.segment, lines: waiting.lines, shift: waiting.shift))
        case .bodyMade(let segment, let body, let linesClamped, let restamped):
            metrics.pointsRepaired += UInt64(linesClamped)
            queue.keepBody(body, of: segment, restamped: restamped, hasSpool: ledger.isActive)
            return BatchingAction(.useBody(body))
        case .offsetLearned(let nanoseconds):
            // Counted: what this run recorded and cannot move (sent, sending, dropped, only compressed).
            guard !offsetLearned else { return BatchingAction() }
            offsetLearned = true
            let moved = queue.shiftPending(by: nanoseconds, precision: precision)
            metrics.pointsOnDeviceClock = metrics.pointsRecorded > moved ? metrics.pointsRecorded - moved : 0
            return BatchingAction()
        case .delivered(let segment, let destination, let sentBytes, let compressedBytes):
            delivered(segment, to: destination, sentBytes: sentBytes, compressedBytes: compressedBytes)
            return BatchingAction(wakeups: [.spoolWorker, .batchesLeft])
        case .refused(let segment, let destination, let reason, let lines):
            return refused(segment, by: destination, reason: reason, lines: lines)
        case .splitWanted(let segment):
            guard let index = queue.index(of: segment) else { return BatchingAction() }
            let batch = queue.batches[index]
            return BatchingAction(.split(segment: segment, contents: batch.contents, lineCount: batch.lineCount))
        case .split(let segment, let destination, let halves, let names, let written, let failure):
            split(segment, for: destination, into: halves, names: names, written: written, failure: failure)
            return BatchingAction(wakeups: .spoolWorker)
        case .sendFailed(let segment, let destination, let notBefore, let now, let error, let retryLimit):
            return failed(segment, for: destination, notBefore: notBefore, now: now, error: error, limit: retryLimit)
        case .retryWaitsCleared:
            cursors.clearRetryWaits()
            return BatchingAction(wakeups: .shippers)
        case .spoolRoundStarted:
            let work = ledger.startRound(for: queue.batches)
            return BatchingAction(work.isEmpty ? .none : .writeSpool(work))
        case .spoolRoundFinished(let progress):
            ledger.roundFinished()
            for item in progress.written {
                queue.spooled(item.segment, to: item.end, sealed: item.sealed, hasSpool: ledger.isActive)
            }
            for failure in progress.failures { ledger.count(failure) }
            guard let message = ledger.takeReport() else { return BatchingAction() }
            return BatchingAction(.reportSpoolFailure(message))
        case .spoolFailed(let error):
            ledger.count(error)
            return BatchingAction()
        case .restored(let result):
            for failure in result.failures { ledger.count(failure) }
            restored(result.batches, sequencesAfter: result.highestSequence, linesLeftOut: result.linesLeftOut)
            return BatchingAction(wakeups: .spoolWorker)
        case .spoolReleased:
            let lost = ledger.release(queue.batches)
            metrics.pointsLost += lost
            return BatchingAction(.lost(lost))
        }
        // The counting events, which ask nothing more.
        return BatchingAction()
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
        if queue.openIfNeeded(now: now) {
            cursors.openBatches(by: 1)
            action.wakeups.insert(.shippers)
        }
        guard let (added, full) = queue.append(line, series: series, instants: &recentInstants, limits: limits) else {
            // The series has no free instant near the point's time.
            metrics.pointsDropped += 1
            if queue.removeLastIfEmpty() { cursors.openBatches(by: -1) }
            return action
        }
        action.accepted = true
        lastLineAt = now
        if !line.repairs.isEmpty { metrics.pointsRepaired += 1 }
        metrics.pointsRecorded += 1
        if full {
            queue.sealLast(for: cursors.allBits)
            // Sealed by its size: the spool worker writes it through and makes its body now.
            action.wakeups.formUnion([.shippers, .spoolWorker])
        }
        // Last: dropping shifts the batches' indices.
        var over = cursors.addLine(bytes: added)
        while over != 0 {
            let destination = DestinationID(index: over.trailingZeroBitCount)
            over &= over - 1
            if dropOldest(for: destination) { action.wakeups.formUnion([.spoolWorker, .batchesLeft]) }
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
    private mutating func dropOldest(for destination: DestinationID) -> Bool {
        var dropped = false
        var index = 0
        while cursors[destination].mustDrop && index < queue.batches.count {
            guard queue.batches[index].awaits(destination.bit) else {
                index += 1
                continue
            }
            let segment = queue.batches[index].segment
            if let lines = release(index, from: destination) { cursors.dropped(lines, for: destination) }
            dropped = true
            if queue.batches.indices.contains(index), queue.batches[index].segment == segment { index += 1 }
        }
        return dropped
    }

    /// Clears `destination`'s bit on batch `index` and takes it off the destination's backlog; the batch
    /// leaves when no destination needs it, its file going to the spool worker. Returns the batch's lines,
    /// `nil` if the destination did not need it.
    @discardableResult
    private mutating func release(_ index: Int, from destination: DestinationID) -> Int? {
        let segment = queue.batches[index].segment
        guard let released = queue.release(index, from: destination.bit) else { return nil }
        cursors.add(batches: -1, lines: -released.lines, bytes: -released.bytes, to: destination)
        if released.left { ledger.remove([segment]) }
        return released.lines
    }

    // MARK: Sealing

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    private mutating func sealDue(now: Duration, jitter: Duration) -> Duration? {
        guard let firstLineAt = queue.openSince else { return nil }
        let due = min(lastLineAt + limits.flushDelay, firstLineAt + limits.maximumAge) + jitter
        if isClosed || now >= due {
            queue.sealLast(for: cursors.allBits)
            return nil
        }
        return due
    }

    /// Stops intake: later lines are dropped and counted. The open batch is sealed.
    private mutating func close() {
        isClosed = true
        queue.sealLast(for: cursors.allBits)
    }

    // MARK: Reading

    /// Whether `destination` has nothing left to send.
    func isDrained(for destination: DestinationID) -> Bool { cursors[destination].pendingBatches == 0 }

    /// The counters, with what is pending now: the destinations' summed, and each one's.
    var currentMetrics: AgentMetrics {
        var metrics = metrics
        metrics.pendingLines = queue.batches.reduce(0) { $0 + $1.lineCount }
        metrics.pendingBytes = queue.batches.reduce(0) { $0 + $1.lineBytes }
        metrics.spoolWriteErrors += ledger.failures
        return cursors.adding(to: metrics)
    }

    /// Memory held by the batches' lines and bodies and the spare buffers, spare capacity included.
    var reservedBytes: Int { queue.reservedBytes }

    // MARK: Sending

    /// The oldest sealed batch `destination` needs if it may be sent at `now`, a join to make first,
    /// or how long to wait.
    private mutating func nextSend(
        for destination: DestinationID,
        now: Duration,
        openDeadline: Duration?
    ) -> BatchingAction {
        guard let index = queue.head(of: destination.bit), queue.batches[index].isSealed else {
            return BatchingAction(.wait(until: openDeadline))
        }
        if let notBefore = cursors[destination].retryNotBefore, notBefore > now {
            return BatchingAction(.wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore))
        }
        if let plan = queue.joinPlan(at: index, limits: limits, hasSpool: ledger.isActive) {
            return BatchingAction(.join(plan))
        }
        queue.startSending(index, to: destination.bit)
        let head = queue.batches[index]
        return BatchingAction(
            .send(segment: head.segment, body: head.body, lineCount: head.lineCount, lineBytes: head.lineBytes)
        )
    }

    /// The join of `plan` is made (`lines`, written to the spool as a sealed file when `written`), or
    /// could not be (`nil`). It replaces its sources if they are still there, in a row, unchanged and
    /// being sent nowhere; otherwise (one was dropped or sent meanwhile) it is let go. Its sources'
    /// files, or its own, go to the spool worker.
    private mutating func joined(_ plan: MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?) {
        if let failure { ledger.count(failure) }
        let kept = !ledger.isActive || written
        guard let join = queue.join(plan, lines: kept ? lines : nil) else {
            // Sent as it is: a join that failed is not tried again for this batch.
            if written { ledger.remove([plan.segment]) }
            return
        }
        cursors.joined(plan.sources.count, awaiting: join.awaiting, grown: join.grown)
        ledger.remove(plan.sources)
    }

    /// `destination` stored batch `segment`.
    private mutating func delivered(
        _ segment: String,
        to destination: DestinationID,
        sentBytes: Int,
        compressedBytes: Int
    ) {
        cursors.delivered(to: destination, sentBytes: sentBytes, compressedBytes: compressedBytes)
        guard let index = queue.stopSending(segment, to: destination.bit), queue.batches[index].awaits(destination.bit)
        else { return }
        cursors.wrote(queue.batches[index].lineCount, to: destination)
        queue.succeeded(index)
        release(index, from: destination)
    }

    /// `destination` refused batch `segment` for good (or it failed past the retry limit): the batch leaves its
    /// cursor, the refused lines counted as refused (the rest of a partial write as stored). Asks for its
    /// lines to be copied to `rejected/` outside the lock (not when the batch is gone or there is no spool).
    private mutating func refused(
        _ segment: String,
        by destination: DestinationID,
        reason: String,
        lines: RefusedLines
    ) -> BatchingAction {
        if case .numbered = lines {
            cursors.answered("partial write: \(reason)", by: destination)
        } else {
            cursors.answered(reason, by: destination)
        }
        guard let index = queue.stopSending(segment, to: destination.bit), queue.batches[index].awaits(destination.bit)
        else {
            return BatchingAction(wakeups: .batchesLeft)
        }
        let batch = queue.batches[index]
        // A partial write (InfluxDB 1.x answers `dropped=N`, InfluxDB 3 lists the lines): the rest are stored.
        let refused = UInt64(lines.count(of: batch.lineCount))
        cursors.refused(refused, of: batch.lineCount, by: destination, expired: lines.isExpired)
        release(index, from: destination)
        let left = queue.index(of: segment) == nil
        guard ledger.isActive else { return BatchingAction(wakeups: .batchesLeft) }
        // Removed with the copy, which must be written first.
        if left { ledger.keep(segment) }
        return BatchingAction(
            .writeRejected(
                segment: segment,
                contents: batch.contents,
                reason: reason,
                removesFile: left,
                only: lines.numbered
            ),
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
        if let failure { ledger.count(failure) }
        guard let index = queue.stopSending(segment, to: destination.bit), queue.batches[index].awaits(destination.bit)
        else {
            if written { ledger.remove([names.first, names.second].filter { queue.index(of: $0) == nil }) }
            return
        }
        let unwritten = !written && ledger.isActive
        let original = queue.insertHalves(of: index, halves, names: names, for: destination.bit, unwritten: unwritten)
        cursors.add(
            batches: 2,
            lines: halves.firstLines + halves.secondLines,
            bytes: halves.first.count + halves.second.count,
            to: destination
        )
        release(original, from: destination)
        // The whole batch stays on disk when the halves could not be written; they still go from memory.
        if unwritten && queue.index(of: segment) == nil { ledger.keep(segment) }
    }

    /// A send of batch `segment` to `destination` failed: the destination waits until `notBefore`; a batch
    /// failing for longer than `limit` is refused as expired.
    private mutating func failed(
        _ segment: String,
        for destination: DestinationID,
        notBefore: Duration,
        now: Duration,
        error: String,
        limit: Duration?
    ) -> BatchingAction {
        cursors.failed(destination, error: error, notBefore: notBefore)
        guard let index = queue.stopSending(segment, to: destination.bit) else { return BatchingAction() }
        let since = queue.failing(index, now: now)
        guard let limit, now - since > limit else { return BatchingAction() }
        return refused(
            segment,
            by: destination,
            reason: "still failing after the retry limit: \(error)",
            lines: .expired
        )
    }

    /// Batches a previous run left in the spool, ahead of anything recorded, for every destination.
    private mutating func restored(_ restored: [PendingBatch], sequencesAfter highest: UInt64, linesLeftOut: Int) {
        queue.restore(restored, awaiting: cursors.allBits, sequencesAfter: highest)
        let bytes = restored.reduce(0) { $0 + $1.lineBytes }
        let lines = restored.reduce(0) { $0 + $1.lineCount }
        metrics.spoolLinesLeftOut += UInt64(linesLeftOut)
        for destination in cursors.ids {
            cursors.add(batches: restored.count, lines: lines, bytes: bytes, to: destination)
            if cursors[destination].pendingBytes > cursors[destination].maximumPendingBytes {
                _ = dropOldest(for: destination)
            }
        }
    }
}
