import LineProtocol

/// The executor of the batching state: ``BatchingState`` behind the one lock recording takes, and the
/// one function that applies an event to it and runs the action it returns after that lock is released
/// (AsyncHTTPClient's connection pool state machine is the model). The work — gzip, spool files, joins,
/// splits — is ``BatchWorker``'s, outside the lock; what it achieves goes back in as the next event.
/// Every decision is the state's: this type only runs what it is asked to. A recorded line is encoded
/// before the lock, on the recording thread's stack; under the lock only its bytes are copied. The lock
/// order is in the article "How a request becomes a line".
final class PendingBatches: Sendable {
    /// The batching state, and who waits for batches to leave.
    private struct Guarded {
        var batching: BatchingState
        var departures = BatchDepartures()
        /// The losses said at warning already, beside the counts that tell of them.
        var reported = ReportedLosses()
        /// What the record loop's country learner last published.
        var country: CountryLearner.Published?
    }

    /// Guards the batches, counters and the instants each series used: the only lock `record` takes.
    private let state: Locked<Guarded>
    private let encoder: LineEncoder
    /// Does the work after the lock, and holds the spool directory.
    let worker: BatchWorker
    /// One per destination's shipper, signalled when a batch is sealed or opened (see ``wakeup(for:)``).
    private let wakeups: [Wakeup]
    /// Signalled when the spool worker has work now: a batch sealed by its size (to write through and
    /// compress at once, rather than at its next round), or files to remove. A caller that waits for
    /// what it recorded to be on disk posts itself to it (``SpoolWorker/writtenThrough()``).
    let filled = Mailbox<CheckedContinuation<Bool, Never>>()

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
        self.worker = BatchWorker(compressor: compressor, spool: spool)
        let caps = destinationCaps ?? [batching.maximumPendingBytes]
        self.wakeups = (0..<max(1, caps.count)).map { _ in Wakeup() }
        let batching = BatchingState(
            limits: batching,
            precision: encoder.precision,
            hasSpool: spool != nil,
            destinationCaps: caps
        )
        self.state = Locked(Guarded(batching: batching))
    }

    /// What the shipper of `destination` waits on: signalled when a batch is sealed or opened, or retry
    /// waits end.
    func wakeup(for destination: DestinationID) -> Wakeup { wakeups[min(destination.index, wakeups.count - 1)] }

    // MARK: The executor

    /// Applies `event` under the lock, wakes the loops its action names, and runs its work after the
    /// lock is released; work that reports back (a join, a body, a spool round, a copy to `rejected/`)
    /// feeds its outcome in as the next event. A body is made in the caller's `workspace` (the loop's
    /// own gzip memory). Returns the last action's work: what the caller asked for (a send or a wait,
    /// a body, the lines lost).
    @discardableResult
    func modifyStateAndRunActions(
        _ first: BatchingEvent,
        compressingIn workspace: GzipWorkspace? = nil
    ) -> BatchingAction.Work {
        var event = first
        while true {
            let action = state.withLock { $0.batching.handle(event) }
            wake(action.wakeups)
            guard let outcome = worker.run(action.work, compressingIn: workspace) else { return action.work }
            event = outcome
        }
    }

    private func wake(_ wakeups: BatchingAction.Wakeups) {
        if wakeups.contains(.shippers) { for wakeup in self.wakeups { wakeup.signal() } }
        if wakeups.contains(.spoolWorker) { filled.signal() }
        if wakeups.contains(.batchesLeft) {
            for waiter in state.withLock({ $0.departures.announce() }) { waiter.resume() }
        }
    }

    /// How many times batches left so far: pass it to ``waitForDepartures(after:atMost:)`` to miss none.
    var departures: UInt64 { state.withLock { $0.departures.count } }

    /// Waits until batches leave after `seen` departures, or `timeout` has passed, or the task is cancelled.
    func waitForDepartures(after seen: UInt64, atMost timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.waitForDepartures(after: seen) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForDepartures(after seen: UInt64) async {
        let id = state.withLock { $0.departures.newWaiter() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let kept = state.withLock { !Task.isCancelled && $0.departures.wait(id, after: seen, continuation) }
                if !kept { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.departures.cancel(id) }?.resume()
        }
    }

    // MARK: Recording

    /// Encodes `point` (no lock held) and appends its line to the open batch. Returns `false` if it was
    /// refused or dropped (counted). `afterClose`: recorded after intake has closed, in a sealed batch
    /// of its own (the agent's last health point, recorded once everything before it was sent).
    @discardableResult
    func record(_ point: Point, now: Duration, afterClose: Bool = false, keepsTimestamp: Bool = false) -> Bool {
        do {
            return try encoder.withLine(point) { written in
                // A kept timestamp claims no instant: the line goes as written, so a copy of it sent
                // again (a relay's install retrying) lands on the same instant and the server keeps one.
                let line =
                    keepsTimestamp
                    ? EncodedLine(bytes: written.bytes, seriesKeyBytes: 0, timestamp: nil, repairs: written.repairs)
                    : written
                return append(
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

    /// Appends `line` (one line of line protocol, `\n` included, in the encoder's precision and form) to
    /// the open batch as written, its timestamp kept as ``record(_:now:afterClose:keepsTimestamp:)`` keeps
    /// one: for a relay forwarding lines it has checked.
    @discardableResult
    func record(line: UnsafeBufferPointer<UInt8>, now: Duration) -> Bool {
        append(EncodedLine(bytes: line, seriesKeyBytes: 0, timestamp: nil), series: 0, now: now)
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
        let action = state.withLock { $0.batching.record(line, series: series, now: now, afterClose: afterClose) }
        if !action.wakeups.isEmpty { wake(action.wakeups) }
        return action.accepted
    }

    // MARK: Work the caller does

    /// Splits a batch into two halves on a line boundary (after a 413), outside the lock; the halves
    /// are written to the spool before the batch's own file goes. `false` for a single line, or a batch
    /// that is gone.
    func split(_ segment: String, for destination: DestinationID) -> Bool {
        let wanted = modifyStateAndRunActions(.splitWanted(segment: segment))
        guard case .split(let segment, let contents, let lineCount) = wanted,
            let halves = worker.split(segment, contents: contents, lineCount: lineCount, for: destination)
        else { return false }
        modifyStateAndRunActions(halves)
        return true
    }

    // MARK: Spool

    /// One round of the spool worker: writes what was recorded since the last round through to the
    /// spool files, seals the files of sealed batches and removes the files of batches that are gone.
    /// Called every few milliseconds. The work is taken out under the state lock and done outside it,
    /// so recording never waits for the disk. `logFailure` is called once, with the first spool
    /// failure; later ones are only counted (``AgentMetrics/spoolWriteErrors``).
    ///
    /// Rounds are the spool worker's: only its loop calls this while the agent runs, and
    /// ``releaseSpool(logFailure:)`` once its loops have ended (``APIHealthAgent/writeThrough()`` asks
    /// the worker, or runs the round itself before the agent starts). The batching state hands out one
    /// round's work at a time all the same, so a second caller never appends the same bytes twice.
    func writeThrough(logFailure: (String) -> Void) {
        guard worker.spool != nil,
            case .reportSpoolFailure(let message) = modifyStateAndRunActions(.spoolRoundStarted)
        else { return }
        logFailure(message)
    }

    /// Loads the batches a previous run left in the spool, before any new data, cut again within the
    /// batch limits (``SpoolRestore``). Returns what was left out.
    func restore(from reader: SpoolReader) throws(SpoolError) -> [SpoolProblem] {
        let limits = state.withLock { $0.batching.limits }
        let (result, problems) = try SpoolRestore.restore(from: reader, into: worker.spool, limits: limits)
        modifyStateAndRunActions(.restored(result))
        return problems
    }

    /// Writes what is left through and releases the spool (and its lock) after shutdown. Returns the
    /// number of pending points that are neither delivered nor on disk: lost when the process exits
    /// (also counted in ``AgentMetrics/pointsLost``).
    @discardableResult
    func releaseSpool(logFailure: (String) -> Void = { _ in }) -> UInt64 {
        writeThrough(logFailure: logFailure)
        let work = modifyStateAndRunActions(.spoolReleased)
        worker.releaseSpool()
        guard case .lost(let lost) = work else { return 0 }
        return lost
    }

    // MARK: Reading

    var isClosed: Bool { state.withLock { $0.batching.isClosed } }

    /// No batch is pending.
    var isDrained: Bool { state.withLock { $0.batching.batches.isEmpty } }

    /// `destination` has nothing left to send.
    func isDrained(for destination: DestinationID) -> Bool {
        state.withLock { $0.batching.isDrained(for: destination) }
    }

    /// Points offered after intake closed, dropped (a producer that still records after the agent stopped).
    var droppedAfterClose: UInt64 { state.withLock { $0.batching.droppedAfterClose } }

    /// Memory held by the pending batches' lines and bodies and the spare buffers, spare capacity
    /// included (for tests and diagnostics).
    var reservedBytes: Int { state.withLock { $0.batching.reservedBytes } }

    /// Every pending line, oldest first (for tests and diagnostics).
    func pendingBytes() -> [UInt8] {
        let contents = state.withLock { $0.batching.batches.map(\.contents) }
        return contents.flatMap { $0.lines() ?? [] }
    }

    /// The counters as they are.
    var currentMetrics: AgentMetrics { state.withLock { $0.batching.currentMetrics } }

    // MARK: The country learned

    /// Publishes what the record loop's ``CountryLearner`` has learned, for the threads that read it.
    func publishCountry(_ published: CountryLearner.Published) {
        state.withLock { $0.country = published }
    }

    /// What the country learner last published (`nil` without one).
    var publishedCountry: CountryLearner.Published? { state.withLock { $0.country } }

    // MARK: Losses said once

    /// Whether intake has closed and no refusal after it was reported yet (then it counts as reported).
    func isFirstRefusalAfterClose() -> Bool {
        state.withLock { $0.batching.isClosed && $0.reported.firstTime(.recordedAfterStop) }
    }

    /// The destinations whose backlog has dropped points at its cap and that were not reported yet
    /// (each then counts as reported), with their counters.
    func destinationsFirstDroppingAtCap() -> [(index: Int, metrics: DestinationMetrics)] {
        state.withLock { state in
            state.batching.currentMetrics.destinations.enumerated().compactMap { index, destination in
                guard destination.pointsDropped > 0, state.reported.firstTime(.droppedAtCap(index)) else { return nil }
                return (index, destination)
            }
        }
    }

    /// The requests counted in the overflow series, the first time there are any (then it counts as
    /// reported); `nil` otherwise.
    func firstEndpointOverflow() -> UInt64? {
        state.withLock { state in
            let requests = state.batching.metrics.requestsOverflowed
            return requests > 0 && state.reported.firstTime(.endpointsOverflowed) ? requests : nil
        }
    }
}
