import Foundation
import LineProtocol

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose sample is encoded (and, for a `.request` one, built) at the next drain (see
/// ``PendingBatches/deferRecord(now:_:)``).
struct DeferredSample {
    enum Source {
        /// A URLSession task's sample and request; boxed, so the queue's entries stay two words wide.
        indirect case sample(RequestSample, URLRequest)
        case request(any EndedRequestSource)
    }

    let now: Duration
    let source: Source

    /// The sample; a `.request` one finds its correlation id among `correlationHeaders`.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        switch source {
        case .sample(let sample, _): sample
        case .request(let request): request.makeSample(correlationHeaders: correlationHeaders)
        }
    }

    /// What the capture filter sees of the request.
    var request: SentRequest {
        switch source {
        case .sample(_, let request): SentRequest(request)
        case .request(let request): SentRequest(request)
        }
    }
}

/// A request that has ended and builds its own sample when the agent encodes it (see
/// `APIHealthAgent.recordLater(_:)`): queuing one allocates nothing.
package protocol EndedRequestSource: AnyObject, Sendable {
    /// The request's sample, its correlation id the first of `correlationHeaders` it carries; `nil`
    /// to record nothing.
    func makeSample(correlationHeaders: [String]) -> RequestSample?
    /// The value of the request's header `name` (any case), for the capture filter.
    func requestHeader(_ name: String) -> String?
}

/// The pending lines and the work they need: the ``BatchingState`` behind the one lock `record` takes,
/// and the executor of what its events return — gzip, spool files, joins and splits — run after that
/// lock is released (AsyncHTTPClient's connection pool state machine is the model). Beside it, the
/// queue of captured samples waiting to be encoded (``deferRecord(now:_:)``), behind its own lock.
///
/// Recording holds the state lock only to append a line's bytes and count it. The spool is written by
/// one worker (``writeThrough(logFailure:)``, every few milliseconds), which also removes the files of
/// batches delivered, dropped, joined or split; the shipper joins, splits and refuses batches with
/// their files outside the lock, and commits the result as an event.
final class PendingBatches: Sendable {
    /// Guards the batches, counters and timestamps: the only lock `record` takes.
    private let state: Locked<BatchingState>
    private let encoder: LineEncoder
    /// Turns the deferred samples into series and fields.
    private let schema: RequestSchema?
    /// Guards the spool directory while the agent holds it (`nil` without one, or once released).
    private let spoolDirectory: Locked<SpoolDirectory?>
    /// Guards the samples to build and encode at the next drain (see ``deferRecord(now:_:)``), and
    /// whether intake has closed (later samples are dropped at once).
    private let deferred = Locked((samples: [DeferredSample](), isClosed: false))
    /// Held while a drain runs, so drains keep the samples' order and a reader waits for a drain under
    /// way; a recording thread never waits for it (it leaves the drain to the one running). Guards the
    /// number of drains run. (A value, not `Void`: ThreadSanitizer takes a `Void` state's address,
    /// which is the object's own, for a write.)
    private let drainInProgress = Locked<UInt64>(0)
    /// Held while the spool worker runs a round, so no bytes are appended twice. Guards the number of
    /// rounds run.
    private let spoolWorker = Locked<UInt64>(0)
    /// Deferred samples waiting at most: the caller that queues the last one drains them all on its
    /// own thread.
    static let maximumDeferred = 512
    /// Emptied batch buffers kept for reuse at most.
    static var spareBufferLimit: Int { BatchingState.spareBufferLimit }
    /// One per destination's shipper, signalled when a batch is sealed or opened (see ``wakeup(for:)``).
    private let wakeups: [Wakeup]
    /// Signalled when the spool worker has work now: a batch sealed by its size (to write through and
    /// compress at once, rather than at its next round), or files to remove.
    let filled = Wakeup()
    /// Announced when batches leave (delivered, refused, dropped), for those waiting for none to be left.
    let batchesLeft = Broadcast()

    /// Pending batches for `destinationCaps.count` destinations (one by default), each backlog within
    /// its cap.
    init(
        batching: APIHealthConfiguration.Batching,
        encoder: LineEncoder,
        spool: SpoolDirectory?,
        schema: RequestSchema? = nil,
        destinationCaps: [Int]? = nil
    ) {
        self.encoder = encoder
        self.schema = schema
        self.spoolDirectory = Locked(spool)
        self.wakeups = (0..<max(1, destinationCaps?.count ?? 1)).map { _ in Wakeup() }
        self.state = Locked(
            BatchingState(
                limits: batching,
                precision: encoder.precision,
                hasSpool: spool != nil,
                destinationCaps: destinationCaps
            )
        )
    }

    private var spool: SpoolDirectory? { spoolDirectory.withLock { $0 } }

    /// What the shipper of `destination` waits on: signalled when a batch is sealed or opened, or retry
    /// waits end.
    func wakeup(for destination: Int) -> Wakeup { wakeups[min(destination, wakeups.count - 1)] }

    /// The first destination's wakeup (a store with no destination seals its batches on it).
    var wakeup: Wakeup { wakeups[0] }

    private func wakeShippers() {
        for wakeup in wakeups { wakeup.signal() }
    }

    // MARK: Recording

    /// Encodes `point` into the open batch. Returns `false` if it was refused or dropped (counted).
    @discardableResult
    func record(_ point: Point, now: Duration) -> Bool {
        append(now: now) { bytes, instants throws(LineProtocolError) in
            try encoder.encode(point, into: &bytes) { seriesKey, timestamp in
                instants.claim(series: RecentInstants.seriesID(seriesKey), timestamp: timestamp)
            }
        }
    }

    /// Records `point` after intake has closed, in a sealed batch of its own: the agent's last health
    /// point, recorded once everything before it was sent.
    @discardableResult
    func recordAfterClose(_ point: Point, now: Duration) -> Bool {
        append(now: now, afterClose: true) { bytes, instants throws(LineProtocolError) in
            try encoder.encode(point, into: &bytes) { seriesKey, timestamp in
                instants.claim(series: RecentInstants.seriesID(seriesKey), timestamp: timestamp)
            }
        }
    }

    /// Encodes one line of a prerendered series into the open batch, as ``record(_:now:)`` does, with
    /// the fields `writeFields` adds (it may be called twice for a line longer than 1 KiB).
    @discardableResult
    func record(
        series: RequestSeries,
        timestamp: Timestamp,
        now: Duration,
        fields writeFields: (inout FieldWriter) -> Void
    ) -> Bool {
        append(now: now) { bytes, instants throws(LineProtocolError) in
            // Converted once: the prefetch needs the value before the line is written.
            guard let value = timestamp.value(in: encoder.precision) else {
                throw .timestampOutOfRange(timestamp, encoder.precision)
            }
            instants.prefetch(series: series.id, timestamp: value)
            return try encoder.encode(
                series: series.key,
                timestampValue: value,
                into: &bytes,
                adjustingTimestamp: { _, timestamp in instants.claim(series: series.id, timestamp: timestamp) },
                fields: writeFields
            )
        }
    }

    /// Passes `sample` of `request` through the capture filter, and encodes what it keeps into the open
    /// batch (a sample it drops is counted, and is no loss: returns `true`).
    @discardableResult
    @inline(__always)
    func record(_ sample: RequestSample, request: @autoclosure () -> SentRequest, now: Duration) -> Bool {
        guard let schema else { return false }
        guard let filter = schema.filter else { return encode(sample, schema: schema, now: now) }
        guard let kept = filter(sample, request()) else {
            state.withLock { $0.countFiltered() }
            return true
        }
        return encode(kept, schema: schema, now: now)
    }

    /// Encodes `sample` (through the schema's series and fields) into the open batch.
    @inline(__always)
    private func encode(_ sample: RequestSample, schema: RequestSchema, now: Duration) -> Bool {
        guard let series = schema.series(for: sample) else { return false }
        switch series {
        case .success(let series):
            if let interval = series.interval {
                switch interval.add(
                    duration: sample.duration,
                    failed: RequestSchema.isFailure(sample, series: series),
                    requestBytes: sample.requestBytes,
                    responseBytes: sample.responseBytes
                ) {
                case .counted: break
                case .countedOnly: return true
                case .closed:
                    state.withLock { $0.countDroppedAfterClose() }
                    return false
                }
            }
            return record(series: series, timestamp: Timestamp(date: sample.startedAt), now: now) { fields in
                schema.writeFields(of: sample, series: series, to: &fields)
            }
        case .failure:
            countInvalid()
            return false
        }
    }

    /// Runs `encode` on the open batch's bytes under the state lock, then signals whoever the line
    /// gave work to.
    @inline(__always)
    private func append(
        now: Duration,
        afterClose: Bool = false,
        _ encode: (inout [UInt8], inout RecentInstants) throws(LineProtocolError) -> LineEncoder.Repairs
    ) -> Bool {
        let appended = state.withLock {
            afterClose ? $0.appendAfterClose(now: now, encode) : $0.append(now: now, encode)
        }
        if appended.wakesShipper { wakeShippers() }
        if appended.sealedFull || appended.dropped { filled.signal() }
        if appended.dropped { batchesLeft.announce() }
        return appended.accepted
    }

    /// Queues a sample to be encoded (built first, for a `.request` one) at the next drain,
    /// off the caller's path: the spool worker drains every 20 ms, every reader of the batches that
    /// must see every sample (pending lines, sealing before a send, flushing, shutdown) drains first,
    /// and the caller that queues the ``maximumDeferred``th sample drains them all unless a drain is
    /// under way. `now` is when the request ended, for batching.
    /// Once intake has closed, a sample is dropped (and counted) at once: returns `false`.
    @discardableResult
    func deferRecord(now: Duration, _ source: DeferredSample.Source) -> Bool {
        let waiting = deferred.withLock { queue -> Int? in
            if queue.isClosed { return nil }
            queue.samples.append(DeferredSample(now: now, source: source))
            return queue.samples.count
        }
        guard let waiting else {
            state.withLock { $0.countDroppedAfterClose() }
            return false
        }
        if waiting >= Self.maximumDeferred { drainDeferred(waitingForOneUnderWay: false) }
        return true
    }

    /// Builds and encodes every deferred sample, in the order they were queued. With
    /// `waitingForOneUnderWay` false, returns at once when another drain is under way (it, or the
    /// next, takes these samples).
    func drainDeferred(waitingForOneUnderWay: Bool = true) {
        let drain = { (drains: inout UInt64) in
            drains &+= 1
            let samples = self.deferred.withLock { queue -> [DeferredSample] in
                guard !queue.samples.isEmpty else { return [] }
                // The next queue starts with room for as many as this one held.
                var taken: [DeferredSample] = []
                taken.reserveCapacity(queue.samples.count)
                swap(&taken, &queue.samples)
                return taken
            }
            let correlationHeaders = self.schema?.correlationHeaders ?? []
            for deferred in samples {
                if let sample = deferred.sample(correlationHeaders: correlationHeaders) {
                    self.record(sample, request: deferred.request, now: deferred.now)
                }
            }
        }
        if waitingForOneUnderWay {
            drainInProgress.withLock(drain)
        } else {
            drainInProgress.withLockIfAvailable(drain)
        }
    }

    /// Whether samples wait to be encoded.
    private var hasDeferredSamples: Bool { deferred.withLock { !$0.samples.isEmpty } }

    /// Counts points whose values were changed on their way out (see ``Shipper``).
    func countRepaired(_ points: Int) {
        state.withLock { $0.countRepaired(points) }
    }

    /// Counts a sample that could not become a line at all.
    func countInvalid() {
        state.withLock { $0.countInvalid() }
    }

    // MARK: Sealing and sending

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    func sealDue(now: Duration, jitter: Duration = .zero) -> Duration? {
        drainDeferred()
        return state.withLock { $0.sealDue(now: now, jitter: jitter) }
    }

    /// Seals the open batch now (`flush()` and shutdown).
    func sealOpenBatch() {
        drainDeferred()
        state.withLock { $0.sealOpenBatch() }
        wakeShippers()
    }

    /// The oldest sealed batch if it may be sent at `now` (joined first with the batches behind it,
    /// outside the lock, see ``merge(_:)``), or how long to wait.
    func next(now: Duration, openDeadline: Duration?, destination: Int = 0) -> NextSend {
        while true {
            switch state.withLock({ $0.nextSend(now: now, openDeadline: openDeadline, destination: destination) }) {
            case .next(let next): return next
            case .merge(let plan): merge(plan)
            }
        }
    }

    /// Joins the batches of `plan` outside the lock: their lines (unpacked from bodies where only they
    /// hold them) into one, written to the spool as a sealed file before the sources' files go. A join
    /// whose sources changed meanwhile (one was dropped at the cap) is let go.
    private func merge(_ plan: MergePlan) {
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
        state.withLock { $0.merged(plan, lines: lines, written: written, failure: failure) }
        filled.signal()
    }

    /// The gzip body of batch `segment`: the one kept, or one `makeBody` makes of its lines (outside
    /// the lock), kept for the batch's retries. `nil` if the batch is gone or `makeBody` failed.
    func body(of segment: String, making makeBody: ([UInt8]) -> [UInt8]?) -> [UInt8]? {
        guard var kept = state.withLock({ $0.bodyOrLines(of: segment) }) else { return nil }
        if let body = kept.body { return body }
        return makeAndKeepBody(of: segment, from: &kept.lines, makeBody)
    }

    /// Makes the gzip bodies of the sealed batches waiting behind the head, newest first (the shipper
    /// makes the head's as it sends it), so a backlog is held compressed: once a batch's lines are on
    /// disk (or there is no spool), only its body stays in memory and its buffer is reused. Stops at
    /// the first body `makeBody` fails to make.
    func makeWaitingBodies(_ makeBody: ([UInt8]) -> [UInt8]?) {
        while var next = state.withLock({ $0.nextWaitingWithoutBody() }),
            makeAndKeepBody(of: next.segment, from: &next.lines, makeBody) != nil
        {}
    }

    /// Makes the body of batch `segment` from `lines` (taken out under the lock) and keeps it with the
    /// batch, which may then let its lines go. `lines` is emptied first, so the batch holds the only
    /// reference to their buffer, which is then reused rather than copied.
    private func makeAndKeepBody(
        of segment: String,
        from lines: inout [UInt8],
        _ makeBody: ([UInt8]) -> [UInt8]?
    ) -> [UInt8]? {
        guard let body = makeBody(lines) else { return nil }
        lines = []
        state.withLock { $0.keepBody(body, of: segment) }
        return body
    }

    /// `destination` stored the batch. Its spool file is removed by the spool worker once no
    /// destination needs it.
    func acknowledge(_ segment: String, sentBytes: Int, compressedBytes: Int, destination: Int = 0) {
        state.withLock {
            $0.delivered(segment, sentBytes: sentBytes, compressedBytes: compressedBytes, destination: destination)
        }
        filled.signal()
        batchesLeft.announce()
    }

    /// `destination` refused the batch for good: a copy goes to `rejected/` with `reason` (written
    /// outside the lock), and the batch's file goes once no destination needs it. `count` refused
    /// lines of a partial write (the rest were stored); all of them by default.
    func reject(_ segment: String, reason: String, expired: Bool = false, count: Int? = nil, destination: Int = 0) {
        let refusal = state.withLock {
            $0.refused(segment, reason: reason, expired: expired, count: count, destination: destination)
        }
        batchesLeft.announce()
        // Lines that cannot be unpacked from the body stay in their spool file, read again at the next start.
        guard let refusal, let spool, let lines = refusal.contents.lines() else { return }
        writeRejected(lines, of: segment, reason: reason, removingSegment: refusal.removesFile, in: spool)
    }

    /// `destination` stored all but some lines of a batch (a partial write): `refused` maps the
    /// refused lines' numbers (from 1) to the server's reason. They are counted one by one and copied
    /// to `rejected/` with their reasons; the batch leaves the destination's cursor.
    func rejectLines(_ segment: String, refused: [Int: String], destination: Int = 0) {
        let summary = refused.sorted { $0.key < $1.key }.map { "line \($0.key): \($0.value)" }.joined(separator: "\n")
        let refusal = state.withLock {
            $0.refused(
                segment,
                reason: "partial write: \(summary)",
                expired: false,
                count: refused.count,
                destination: destination
            )
        }
        batchesLeft.announce()
        guard let refusal, let spool, let lines = refusal.contents.lines() else { return }
        var kept: [UInt8] = []
        var number = 0
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) {
                number += 1
                if refused[number] != nil {
                    kept += buffer[line.range]
                    kept.append(UInt8(ascii: "\n"))
                }
            }
        }
        writeRejected(kept, of: segment, reason: summary, removingSegment: refusal.removesFile, in: spool)
    }

    /// Copies refused lines to `rejected/`, then removes the batch's own file if no destination needs it.
    private func writeRejected(
        _ lines: [UInt8],
        of segment: String,
        reason: String,
        removingSegment: Bool,
        in spool: SpoolDirectory
    ) {
        do throws(SpoolError) {
            try spool.reject(segment, bytes: lines, reason: reason, removingSegment: removingSegment)
        } catch {
            state.withLock { $0.countSpoolFailure(error) }
        }
    }

    /// Splits a batch into two halves on a line boundary (after a 413), outside the lock; the halves
    /// are written to the spool before the batch's own file goes. `false` for a single line.
    func split(_ segment: String, destination: Int = 0) -> Bool {
        guard let source = state.withLock({ $0.splitSource(segment) }), let lines = source.contents.lines(),
            let halves = SplitHalves(lines, count: source.lineCount)
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
        state.withLock {
            $0.split(segment, into: halves, names: names, written: written, failure: failure, destination: destination)
        }
        filled.signal()
        return true
    }

    /// Schedules the destination's next send at `notBefore`. Returns `false` when the batch has been
    /// failing for longer than `retryLimit` (it is then set aside as expired).
    func scheduleRetry(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?,
        destination: Int = 0
    ) -> Bool {
        let keep = state.withLock {
            $0.failed(
                segment,
                notBefore: notBefore,
                now: now,
                error: error,
                retryLimit: retryLimit,
                destination: destination
            )
        }
        if !keep {
            reject(
                segment,
                reason: "still failing after the retry limit: \(error)",
                expired: true,
                destination: destination
            )
        }
        return keep
    }

    /// The number of sends in a row to `destination` that failed (the backoff grows with it).
    func attempts(of segment: String, destination: Int = 0) -> Int {
        state.withLock { $0.failedAttempts(destination: destination) }
    }

    // MARK: Shutdown

    /// Stops intake: later points are dropped and counted. The open batch is sealed.
    /// Closes intake: encodes the samples still waiting, runs `last` (which may still record: the last
    /// interval points), then seals what is open; later points are dropped and counted.
    func close(recordingLast last: () -> Void = {}) {
        deferred.withLock { $0.isClosed = true }
        drainDeferred()
        last()
        state.withLock { $0.close() }
        wakeShippers()
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// No batch is pending and no sample waits to be encoded.
    var isDrained: Bool {
        !hasDeferredSamples && state.withLock { $0.batches.isEmpty }
    }

    /// `destination` has nothing left to send and no sample waits to be encoded.
    func isDrained(destination: Int) -> Bool {
        !hasDeferredSamples && state.withLock { $0.isDrained(destination: destination) }
    }

    /// Points offered after intake closed, dropped (a producer that still records after the agent stopped).
    var droppedAfterClose: UInt64 { state.withLock { $0.droppedAfterClose } }

    /// Retry waits end now (shutdown sends what is pending without waiting out backoff).
    func clearRetryWaits() {
        state.withLock { $0.clearRetryWait() }
        wakeShippers()
    }

    // MARK: Spool

    /// One round of the spool worker: writes what was recorded since the last round through to the
    /// spool files, seals the files of sealed batches and removes the files of batches that are gone.
    /// Called every few milliseconds. The work is taken out under the state lock and done outside it,
    /// so recording never waits for the disk. `logFailure` is called once, with the first spool
    /// failure; later ones are only counted (``AgentMetrics/spoolWriteErrors``).
    func writeThrough(logFailure: (String) -> Void) {
        drainDeferred()
        let report = spoolWorker.withLock { rounds -> String? in
            rounds &+= 1
            guard let spool else { return nil }
            let work = state.withLock { $0.takeSpoolWork() }
            guard !work.isEmpty else { return nil }
            var progress = SpoolProgress()
            for item in work.appends {
                do throws(SpoolError) {
                    if !item.bytes.isEmpty {
                        do throws(SpoolError) {
                            try spool.append(item.bytes[...], to: item.segment)
                        } catch {
                            // Nothing of the chunk stays on disk: the next round starts where the file ends.
                            progress.written.append((item.segment, spool.committedLength(of: item.segment), false))
                            throw error
                        }
                        progress.written.append((item.segment, item.end, false))
                    }
                    if item.seals {
                        try spool.seal(item.segment)
                        progress.written.append((item.segment, item.end, true))
                    }
                } catch {
                    progress.failures.append(error)
                }
            }
            for segment in work.removals { spool.remove(segment) }
            return state.withLock { $0.spoolWritten(progress) }
        }
        if let report { logFailure(report) }
    }

    /// Loads the batches a previous run left in the spool, before any new data, cut again within the
    /// batch limits (a long run of small batches is joined, a large segment is split). Torn and corrupt
    /// lines and entries that are not regular files of ours are left out and returned.
    ///
    /// Re-cut batches are written before the segments they come from are removed: a crash in between
    /// sends those lines twice, never loses them.
    func restore(from reader: SpoolReader) throws(SpoolError) -> [SpoolProblem] {
        let segments = try reader.segments()
        let limits = state.withLock { $0.limits }
        var problems: [SpoolProblem] = []
        var sources: [(stem: String, lines: [[UInt8]], clean: Bool)] = []
        var highest: UInt64 = 0
        for segment in segments {
            problems += segment.problems
            guard let name = SegmentName.parse(fileName: segment.name) else { continue }
            highest = SegmentName.sequences(in: name.stem).reduce(highest, max)
            if segment.isSkipped { continue }
            sources.append((name.stem, segment.lines, !segment.isOpen && segment.problems.isEmpty))
        }
        // Cut every restored line into batches within the limits, in order.
        var all: [[UInt8]] = []
        var owner: [Int] = []
        for (index, source) in sources.enumerated() {
            all += source.lines
            owner += Array(repeating: index, count: source.lines.count)
        }
        var cuts: [(lines: ArraySlice<[UInt8]>, source: Int, sources: Range<Int>)] = []
        var start = 0
        while start < all.count {
            var end = start
            var size = 0
            while end < all.count && end - start < limits.maximumLines
                && (end == start || size + all[end].count + 1 <= limits.maximumBytes)
            {
                size += all[end].count + 1
                end += 1
            }
            cuts.append((all[start..<end], owner[start], owner[start]..<(owner[end - 1] + 1)))
            start = end
        }
        var batches: [PendingBatch] = []
        var replaced = Set<Int>()
        var kept = Set<Int>()
        var failures: [SpoolError] = []
        var nextSequence = highest + 1
        for cut in cuts {
            let source = sources[cut.source]
            var bytes: [UInt8] = []
            bytes.reserveCapacity(cut.lines.reduce(0) { $0 + $1.count + 1 })
            for line in cut.lines {
                bytes += line
                bytes.append(UInt8(ascii: "\n"))
            }
            var stem = source.stem
            let whole = cut.sources.count == 1 && cut.lines.count == source.lines.count
            if !(whole && source.clean) {
                stem = SegmentName.sequence(nextSequence)
                nextSequence += 1
                do throws(SpoolError) {
                    try spool?.writeSealed(stem, bytes: bytes)
                    replaced.formUnion(cut.sources)
                } catch {
                    failures.append(error)
                    kept.formUnion(cut.sources)
                }
            }
            batches.append(
                PendingBatch(
                    segment: stem,
                    bytes: bytes,
                    lineCount: cut.lines.count,
                    isSealed: true,
                    firstLineAt: .zero,
                    lastLineAt: .zero,
                    spooledBytes: bytes.count,
                    isSpoolSealed: true
                )
            )
        }
        for (index, source) in sources.enumerated()
        where (replaced.contains(index) || source.lines.isEmpty) && !kept.contains(index) {
            spool?.remove(source.stem)
        }
        let linesLeftOut = problems.filter { if case .skippedEntry = $0.kind { false } else { true } }.count
        state.withLock { state in
            for failure in failures { state.countSpoolFailure(failure) }
            state.restored(batches, sequencesAfter: nextSequence - 1, linesLeftOut: linesLeftOut)
        }
        filled.signal()
        return problems
    }

    /// Writes what is left through and releases the spool (and its lock) after shutdown. Returns the
    /// number of pending points that are neither delivered nor on disk: lost when the process exits
    /// (also counted in ``AgentMetrics/pointsLost``).
    @discardableResult
    func releaseSpool(logFailure: (String) -> Void = { _ in }) -> UInt64 {
        writeThrough(logFailure: logFailure)
        let lost = spoolWorker.withLock { _ in
            let lost = state.withLock { $0.releaseSpool() }
            spoolDirectory.withLock { $0 = nil }
            return lost
        }
        return lost
    }

    /// Memory held by the pending batches' lines and bodies and the spare buffers, spare capacity
    /// included (for tests and diagnostics).
    var reservedBytes: Int {
        state.withLock { $0.reservedBytes }
    }

    /// Every pending line, oldest first (for tests and diagnostics).
    func pendingBytes() -> [UInt8] {
        drainDeferred()
        let contents = state.withLock { $0.batches.map(\.contents) }
        return contents.flatMap { $0.lines() ?? [] }
    }

    // MARK: Metrics

    /// The counters, after encoding the samples waiting to be (what a reader of the agent's metrics
    /// expects to see counted).
    var metrics: AgentMetrics {
        drainDeferred()
        return currentMetrics
    }

    /// The counters as they are, without encoding waiting samples (the agent's own health point).
    var currentMetrics: AgentMetrics {
        state.withLock { $0.currentMetrics }
    }
}
