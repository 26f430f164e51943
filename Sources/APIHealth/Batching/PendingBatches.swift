import LineProtocol

/// The executor of the batching state: ``BatchingState`` behind the one lock recording takes, and the
/// one function that applies an event to it and runs the action it returns after that lock is released
/// (AsyncHTTPClient's connection pool state machine is the model). The work — gzip, spool files, joins,
/// splits — is done here, outside the lock; what it achieves goes back in as the next event. Every
/// decision is the state's: this type only runs what it is asked to. A recorded line is encoded before
/// the lock, on the recording thread's stack; under the lock only its bytes are copied.
///
/// The lock order (`spoolRound`, then `spoolDirectory` and `state`) is written on `APIHealthAgent.lifecycle`.
final class PendingBatches: Sendable {
    /// Guards the batches, counters and the instants each series used: the only lock `record` takes.
    private let state: Locked<BatchingState>
    private let encoder: LineEncoder
    /// Makes the request bodies of batches.
    private let compressor: BatchCompressor
    /// Guards the spool directory while the agent holds it (`nil` without one, or once released).
    private let spoolDirectory: Locked<SpoolDirectory?>
    /// Held while the spool worker runs a round, so no bytes are appended twice. Guards the number of
    /// rounds run.
    private let spoolRound = Locked<UInt64>(0)
    /// One per destination's shipper, signalled when a batch is sealed or opened (see ``wakeup(for:)``).
    private let wakeups: [Wakeup]
    /// Signalled when the spool worker has work now: a batch sealed by its size (to write through and
    /// compress at once, rather than at its next round), or files to remove.
    let filled = Wakeup()
    /// Announced when batches leave (delivered, refused, dropped), for those waiting for none to be left.
    let batchesLeft = Broadcast()

    /// Pending batches for `destinationCaps.count` destinations (one with the batching cap when `nil`),
    /// each backlog within its cap.
    init(
        batching: APIHealthConfiguration.Batching,
        encoder: LineEncoder,
        spool: SpoolDirectory?,
        compressor: BatchCompressor = BatchCompressor(level: 1, writesUnsignedAsSigned: false),
        destinationCaps: [Int]? = nil
    ) {
        self.encoder = encoder
        self.compressor = compressor
        self.spoolDirectory = Locked(spool)
        let caps = destinationCaps ?? [batching.maximumPendingBytes]
        self.wakeups = (0..<max(1, caps.count)).map { _ in Wakeup() }
        self.state = Locked(
            BatchingState(limits: batching, precision: encoder.precision, hasSpool: spool != nil, destinationCaps: caps)
        )
    }

    private var spool: SpoolDirectory? { spoolDirectory.withLock { $0 } }

    /// What the shipper of `destination` waits on: signalled when a batch is sealed or opened, or retry
    /// waits end.
    func wakeup(for destination: DestinationID) -> Wakeup { wakeups[min(destination.index, wakeups.count - 1)] }

    // MARK: The executor

    /// Applies `event` under the lock, wakes the loops its action names, and runs its work after the
    /// lock is released; work that reports back (a join, a body, a spool round, a copy to `rejected/`)
    /// feeds its outcome in as the next event. Returns the last action's work: what the caller asked
    /// for (a send or a wait, a body, the lines lost).
    @discardableResult
    private func modifyStateAndRunActions(_ first: BatchingEvent) -> BatchingAction.Work {
        var event = first
        while true {
            let action = state.withLock { $0.handle(event) }
            wake(action.wakeups)
            guard let outcome = run(action.work) else { return action.work }
            event = outcome
        }
    }

    private func wake(_ wakeups: BatchingAction.Wakeups) {
        if wakeups.contains(.shippers) { for wakeup in self.wakeups { wakeup.signal() } }
        if wakeups.contains(.spoolWorker) { filled.signal() }
        if wakeups.contains(.batchesLeft) { batchesLeft.announce() }
    }

    /// Does `work` outside the lock; returns the event that reports what it achieved, if it has one
    /// (the rest is the caller's: a send, a wait, a body, a split, a report).
    private func run(_ work: BatchingAction.Work) -> BatchingEvent? {
        switch work {
        case .none, .send, .wait, .useBody, .split, .reportSpoolFailure, .lost:
            return nil
        case .join(let plan):
            return join(plan)
        case .makeBody(let segment, let lines):
            guard let made = compressor.body(of: lines) else { return nil }
            return .bodyMade(segment: segment, body: made.body, linesClamped: made.linesClamped)
        case .writeRejected(let segment, let contents, let reason, let removesFile, let only):
            // Lines that cannot be unpacked from the body stay in their spool file, read again at the next start.
            guard let spool, let lines = contents.lines() else { return nil }
            do throws(SpoolError) {
                try spool.reject(
                    segment,
                    bytes: only.map { Self.lines(numbered: $0, of: lines) } ?? lines,
                    reason: reason,
                    removingSegment: removesFile
                )
                return nil
            } catch {
                return .spoolFailed(error)
            }
        case .writeSpool(let work):
            guard let spool else { return .spoolRoundFinished(SpoolProgress()) }
            return .spoolRoundFinished(SpoolWriter.write(work, to: spool))
        }
    }

    /// Joins the batches of `plan`: their lines (unpacked from bodies where only they hold them) into
    /// one, written to the spool as a sealed file before the sources' files go.
    private func join(_ plan: MergePlan) -> BatchingEvent {
        var lines: [UInt8]? = []
        lines?.reserveCapacity(plan.lineBytes)
        for contents in plan.contents {
            // Lines that cannot be unpacked: the head goes as it is.
            guard let batchLines = contents.lines() else {
                lines = nil
                break
            }
            lines? += batchLines
        }
        var written = false
        var failure: SpoolError?
        if let lines, let spool {
            do throws(SpoolError) {
                try spool.writeSealed(plan.segment, bytes: lines)
                written = true
            } catch {
                failure = error
            }
        }
        return .joined(plan, lines: lines, written: written, failure: failure)
    }

    /// The lines of `lines` whose numbers (from 1) `numbered` holds.
    private static func lines(numbered: [Int: String], of lines: [UInt8]) -> [UInt8] {
        var kept: [UInt8] = []
        var number = 0
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) {
                number += 1
                if numbered[number] != nil {
                    kept += buffer[line.range]
                    kept.append(UInt8(ascii: "\n"))
                }
            }
        }
        return kept
    }

    // MARK: Recording

    /// Encodes `point` (no lock held) and appends its line to the open batch. Returns `false` if it was
    /// refused or dropped (counted).
    @discardableResult
    func record(_ point: Point, now: Duration) -> Bool {
        record(point, now: now, afterClose: false)
    }

    /// Records `point` after intake has closed, in a sealed batch of its own: the agent's last health
    /// point, recorded once everything before it was sent.
    @discardableResult
    func recordAfterClose(_ point: Point, now: Duration) -> Bool {
        record(point, now: now, afterClose: true)
    }

    private func record(_ point: Point, now: Duration, afterClose: Bool) -> Bool {
        do {
            return try encoder.withLine(point) { line in
                append(
                    line,
                    series: line.timestamp == nil ? 0 : RecentInstants.seriesID(line.seriesKey),
                    now: now,
                    afterClose: afterClose
                )
            }
        } catch {
            count(afterClose ? .pointInvalid : .lineInvalid)
            return false
        }
    }

    /// Encodes one line of a prerendered series with the fields `writeFields` adds (it may be called
    /// twice for a line longer than 1 KiB), with no lock held, on the caller's stack; then appends it
    /// to the open batch as ``record(_:now:)`` does. `writeFields` is the schema's: it never runs
    /// under the batching lock.
    @discardableResult
    func record(
        series: RequestSeries,
        timestamp: Timestamp,
        now: Duration,
        fields writeFields: (inout FieldWriter) -> Void
    ) -> Bool {
        guard let value = timestamp.value(in: encoder.precision) else {
            count(.lineInvalid)
            return false
        }
        do {
            return try encoder.withLine(series: series.key, timestampValue: value, fields: writeFields) { line in
                append(line, series: series.id, now: now)
            }
        } catch {
            count(.lineInvalid)
            return false
        }
    }

    /// The one event with its own entry point (see ``BatchingState/record(_:series:now:afterClose:)``):
    /// copies the encoded `line` into the open batch under the state lock, then wakes whoever the line
    /// gave work to.
    @inline(__always)
    private func append(_ line: EncodedLine, series: Int, now: Duration, afterClose: Bool = false) -> Bool {
        let action = state.withLock { $0.record(line, series: series, now: now, afterClose: afterClose) }
        if !action.wakeups.isEmpty { wake(action.wakeups) }
        return action.accepted
    }

    /// Counts a point or request that became no line: `event` is one of the counting events.
    func count(_ event: BatchingEvent) {
        modifyStateAndRunActions(event)
    }

    // MARK: Sealing and sending

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    func sealDue(now: Duration, jitter: Duration) -> Duration? {
        guard case .wait(let due) = modifyStateAndRunActions(.flushDue(now: now, jitter: jitter)) else { return nil }
        return due
    }

    /// Seals the open batch now (`flush()` and shutdown).
    func sealOpenBatch() {
        modifyStateAndRunActions(.flushRequested)
    }

    /// The oldest sealed batch `destination` needs if it may be sent at `now` (joined first with the
    /// batches behind it), or how long to wait.
    func next(now: Duration, openDeadline: Duration?, for destination: DestinationID) -> NextSend {
        while true {
            switch modifyStateAndRunActions(.sendWanted(destination, now: now, openDeadline: openDeadline)) {
            case .send(let segment, let body, let lineCount, let lineBytes):
                return .send(segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes)
            case .wait(let deadline):
                return .wait(until: deadline)
            default:
                // A join was made (or let go): ask again.
                continue
            }
        }
    }

    /// The gzip body of batch `segment`: the one kept, or one made of its lines (outside the lock) and
    /// kept for the batch's retries. `nil` if the batch is gone or gzip failed.
    func body(of segment: String) -> [UInt8]? {
        guard case .useBody(let body) = modifyStateAndRunActions(.bodyWanted(segment: segment)) else { return nil }
        return body
    }

    /// Makes the gzip bodies of the sealed batches waiting behind the head, newest first (the shipper
    /// makes the head's as it sends it), so a backlog is held compressed: once a batch's lines are on
    /// disk (or there is no spool), only its body stays in memory and its buffer is reused. Stops at
    /// the first body that cannot be made.
    func makeWaitingBodies() {
        while case .useBody = modifyStateAndRunActions(.waitingBodyWanted) {}
    }

    /// `destination` stored the batch. Its spool file is removed by the spool worker once no
    /// destination needs it.
    func acknowledge(_ segment: String, sentBytes: Int, compressedBytes: Int, for destination: DestinationID) {
        modifyStateAndRunActions(
            .delivered(segment: segment, destination, sentBytes: sentBytes, compressedBytes: compressedBytes)
        )
    }

    /// `destination` refused the batch for good: a copy of the refused lines goes to `rejected/` with
    /// `reason` (written outside the lock), and the batch's file goes once no destination needs it.
    func reject(_ segment: String, reason: String, refused: RefusedLines, for destination: DestinationID) {
        modifyStateAndRunActions(.refused(segment: segment, destination, reason: reason, refused: refused))
    }

    /// Splits a batch into two halves on a line boundary (after a 413), outside the lock; the halves
    /// are written to the spool before the batch's own file goes. `false` for a single line, or a batch
    /// that is gone.
    func split(_ segment: String, for destination: DestinationID) -> Bool {
        guard
            case .split(let segment, let contents, let lineCount) = modifyStateAndRunActions(
                .splitWanted(segment: segment)
            ),
            let lines = contents.lines(), let halves = SplitHalves(lines, count: lineCount)
        else { return false }
        let names = SegmentName.halves(of: segment)
        var written = false
        var failure: SpoolError?
        if let spool {
            do throws(SpoolError) {
                try spool.writeSealed(names.first, bytes: halves.first)
                do throws(SpoolError) {
                    try spool.writeSealed(names.second, bytes: halves.second)
                } catch {
                    // Not half of the batch twice on disk: the whole batch stays there.
                    spool.remove(names.first)
                    throw error
                }
                written = true
            } catch {
                failure = error
            }
        }
        modifyStateAndRunActions(
            .split(segment: segment, destination, halves: halves, names: names, written: written, failure: failure)
        )
        return true
    }

    /// Schedules the destination's next send at `notBefore`; a batch failing for longer than
    /// `retryLimit` is set aside as expired (copied to `rejected/`).
    func scheduleRetry(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?,
        for destination: DestinationID
    ) {
        modifyStateAndRunActions(
            .sendFailed(
                segment: segment,
                destination,
                notBefore: notBefore,
                now: now,
                error: error,
                retryLimit: retryLimit
            )
        )
    }

    /// Retry waits end now (shutdown sends what is pending without waiting out backoff).
    func clearRetryWaits() {
        modifyStateAndRunActions(.retryWaitsCleared)
    }

    // MARK: Shutdown

    /// Stops intake: later points are dropped and counted. The open batch is sealed.
    func close() {
        modifyStateAndRunActions(.intakeClosed)
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// No batch is pending.
    var isDrained: Bool { state.withLock { $0.batches.isEmpty } }

    /// `destination` has nothing left to send.
    func isDrained(for destination: DestinationID) -> Bool { state.withLock { $0.isDrained(for: destination) } }

    /// Points offered after intake closed, dropped (a producer that still records after the agent stopped).
    var droppedAfterClose: UInt64 { state.withLock { $0.droppedAfterClose } }

    // MARK: Spool

    /// One round of the spool worker: writes what was recorded since the last round through to the
    /// spool files, seals the files of sealed batches and removes the files of batches that are gone.
    /// Called every few milliseconds. The work is taken out under the state lock and done outside it,
    /// so recording never waits for the disk. `logFailure` is called once, with the first spool
    /// failure; later ones are only counted (``AgentMetrics/spoolWriteErrors``).
    func writeThrough(logFailure: (String) -> Void) {
        let report = spoolRound.withLock { rounds -> String? in
            rounds &+= 1
            guard spool != nil else { return nil }
            guard case .reportSpoolFailure(let message) = modifyStateAndRunActions(.spoolRoundStarted) else {
                return nil
            }
            return message
        }
        if let report { logFailure(report) }
    }

    /// Loads the batches a previous run left in the spool, before any new data, cut again within the
    /// batch limits (``SpoolRestore``). Returns what was left out.
    func restore(from reader: SpoolReader) throws(SpoolError) -> [SpoolProblem] {
        let limits = state.withLock { $0.limits }
        let (result, problems) = try SpoolRestore.restore(from: reader, into: spool, limits: limits)
        modifyStateAndRunActions(.restored(result))
        return problems
    }

    /// Writes what is left through and releases the spool (and its lock) after shutdown. Returns the
    /// number of pending points that are neither delivered nor on disk: lost when the process exits
    /// (also counted in ``AgentMetrics/pointsLost``).
    @discardableResult
    func releaseSpool(logFailure: (String) -> Void = { _ in }) -> UInt64 {
        writeThrough(logFailure: logFailure)
        return spoolRound.withLock { _ in
            let work = modifyStateAndRunActions(.spoolReleased)
            spoolDirectory.withLock { $0 = nil }
            guard case .lost(let lost) = work else { return 0 }
            return lost
        }
    }

    // MARK: Reading

    /// Memory held by the pending batches' lines and bodies and the spare buffers, spare capacity
    /// included (for tests and diagnostics).
    var reservedBytes: Int {
        state.withLock { $0.reservedBytes }
    }

    /// Every pending line, oldest first (for tests and diagnostics).
    func pendingBytes() -> [UInt8] {
        let contents = state.withLock { $0.batches.map(\.contents) }
        return contents.flatMap { $0.lines() ?? [] }
    }

    /// The counters as they are.
    var currentMetrics: AgentMetrics {
        state.withLock { $0.currentMetrics }
    }
}
