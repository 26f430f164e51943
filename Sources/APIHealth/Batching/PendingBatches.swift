import Foundation
import LineProtocol

/// One batch of encoded lines, open (still filling) or sealed (ready to send).
struct PendingBatch {
    /// Sorts in send order; also the spool file's stem.
    var segment: String
    /// The lines; empty once they are only in `body` (see `lineBytes`).
    var bytes: [UInt8]
    var lineCount: Int
    /// The gzip request body of a sealed batch, made once, ahead of its send or at its first attempt,
    /// and kept for its retries.
    var body: [UInt8]?
    /// The size of the lines when only `body` holds them (they are on disk, or there is no spool).
    var linesOnlyInBody: Int?
    var isSealed = false
    var firstLineAt: Duration
    var lastLineAt: Duration
    /// Bytes already written through to the spool file.
    var spooledBytes = 0
    var isSpoolSealed = false
    var attempts = 0
    var notBefore: Duration?
    var failingSince: Duration?
    /// A half of a batch the server found too large: never merged back with its neighbours.
    var isSplitHalf = false

    /// Bytes of line protocol in the batch.
    var lineBytes: Int { linesOnlyInBody ?? bytes.count }

    /// The lines, unpacked from `body` when only it holds them; `nil` if that fails.
    func lines() -> [UInt8]? {
        guard linesOnlyInBody != nil, let body else { return bytes }
        return try? Gzip.decompress(body)
    }
}

/// A request whose sample is encoded (and, for a `.request` one, built) at the next drain (see
/// ``PendingBatches/deferRecord(now:_:)``).
struct DeferredSample {
    enum Source {
        /// Boxed, so the queue's entries stay two words wide.
        indirect case sample(RequestSample)
        case request(any EndedRequestSource)
    }

    let now: Duration
    let source: Source

    /// The sample; a `.request` one finds its correlation id among `correlationHeaders`.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        switch source {
        case .sample(let sample): sample
        case .request(let request): request.makeSample(correlationHeaders: correlationHeaders)
        }
    }
}

/// A request that has ended and builds its own sample when the agent encodes it (see
/// `APIHealthAgent.recordLater(_:)`): queuing one allocates nothing.
package protocol EndedRequestSource: AnyObject, Sendable {
    /// The request's sample, its correlation id the first of `correlationHeaders` it carries; `nil`
    /// to record nothing.
    func makeSample(correlationHeaders: [String]) -> RequestSample?
}

/// What the shipper should do next.
enum NextSend {
    /// Send the batch `segment`: its gzip body if made already (see ``PendingBatches/body(of:making:)``).
    case send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int)
    /// Nothing to send before `deadline` (`nil`: until something is recorded).
    case wait(until: Duration?)
}

/// The pending lines: the open batch being filled, sealed batches waiting to be sent, the spool that
/// mirrors them on disk, and the counters, all behind one lock; beside them, the queue of captured
/// samples waiting to be encoded (``deferRecord(now:_:)``), behind its own. Recording only encodes
/// into memory, never touching the disk or the network.
final class PendingBatches: Sendable {
    private struct State {
        var batches: [PendingBatch] = []
        var nextSequence: UInt64 = 1
        var pendingBytes = 0
        var metrics = AgentMetrics()
        var recentInstants: RecentInstants
        var isClosed = false
        var spool: SpoolDirectory?
        /// The first spool failure not yet reported to the agent's logger.
        var unreportedSpoolFailure: String?
        var spoolFailureReported = false
        /// Emptied line buffers with room for a whole batch, reused for new batches so their pages
        /// are not faulted in anew (at most ``PendingBatches/spareBufferLimit``).
        var spareBuffers: [[UInt8]] = []
        /// The capacity a new batch's buffer gets.
        let bufferCapacity: Int

        /// Keeps `buffer`, emptied, for a later batch if it has room for a whole one and fewer than
        /// ``PendingBatches/spareBufferLimit`` are kept.
        mutating func reuse(_ buffer: inout [UInt8]) {
            guard buffer.capacity >= bufferCapacity, spareBuffers.count < PendingBatches.spareBufferLimit else {
                return
            }
            buffer.removeAll(keepingCapacity: true)
            spareBuffers.append(buffer)
            buffer = []
        }

        /// An empty buffer with room for a whole batch and the line that overflows it.
        mutating func newBuffer() -> [UInt8] {
            if let spare = spareBuffers.popLast() { return spare }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(bufferCapacity)
            return bytes
        }

        /// Lets batch `index`'s lines go once its body holds them and they are on disk (or there is
        /// no spool); their buffer is reused.
        mutating func releaseLines(_ index: Int) {
            let batch = batches[index]
            guard batch.isSealed, batch.body != nil, batch.linesOnlyInBody == nil,
                spool == nil || (batch.isSpoolSealed && batch.spooledBytes == batch.bytes.count)
            else { return }
            batches[index].linesOnlyInBody = batch.bytes.count
            var lines = batches[index].bytes
            batches[index].bytes = []
            reuse(&lines)
        }

        /// Counts a failed spool operation; only the first one is kept for the log.
        mutating func countSpoolFailure(_ error: any Error) {
            metrics.spoolWriteErrors += 1
            if !spoolFailureReported && unreportedSpoolFailure == nil { unreportedSpoolFailure = "\(error)" }
        }

        /// Seals batch `index` and gives back the room reserved for it to grow when that is more than
        /// an eighth of its bytes (a batch sealed by its size has little left; one sealed early, by
        /// the flush delay, has most of it), so pending memory follows the pending cap.
        mutating func seal(_ index: Int) {
            guard !batches[index].isSealed else { return }
            batches[index].isSealed = true
            var bytes = batches[index].bytes
            if bytes.capacity - bytes.count > bytes.count / 8 {
                batches[index].bytes = []
                batches[index].bytes = exactCopy(bytes[...])
                reuse(&bytes)
            }
        }
    }

    /// A new array holding exactly `bytes`, without spare capacity.
    static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            _ = buffer.initialize(fromContentsOf: bytes)
            count = bytes.count
        }
    }

    private let state: Locked<State>
    private let batching: APIHealthConfiguration.Batching
    private let encoder: LineEncoder
    /// Turns the deferred samples into series and fields.
    private let schema: RequestSchema?
    /// Samples to build and encode at the next drain (see ``deferRecord(now:_:)``), and whether
    /// intake has closed (later samples are dropped at once).
    private let deferred = Locked((samples: [DeferredSample](), isClosed: false))
    /// One drain at a time, and a reader waits for a drain under way, so it sees every sample
    /// deferred before it began.
    private let drainMutex = NSLock()
    /// Deferred samples waiting at most: the one that reaches it drains them all on its own thread.
    static let maximumDeferred = 512
    /// Emptied batch buffers kept for reuse at most.
    static let spareBufferLimit = 2
    /// Signalled when a batch is sealed or something is recorded into an empty store.
    let wakeup = Wakeup()
    /// Signalled when a batch is sealed by its size, so the write-through loop writes it through and
    /// makes its body at once, rather than at its next round (see ``makeWaitingBodies(_:)``).
    let filled = Wakeup()
    /// One write-through at a time, so no bytes are appended twice.
    private let writeThroughMutex = NSLock()

    init(
        batching: APIHealthConfiguration.Batching,
        encoder: LineEncoder,
        spool: SpoolDirectory?,
        schema: RequestSchema? = nil
    ) {
        self.batching = batching
        self.encoder = encoder
        self.schema = schema
        // Room for a full batch and the line that overflows it, so a batch is never copied while it
        // grows (pages are only touched as lines are written).
        var initial = State(
            recentInstants: RecentInstants(precision: encoder.precision),
            bufferCapacity: min(batching.maximumBytes, 16 << 20) + 64 * 1_024
        )
        initial.spool = spool
        self.state = Locked(initial)
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

    /// Encodes `sample` (through the schema's series and fields) into the open batch.
    @discardableResult
    @inline(__always)
    func record(_ sample: RequestSample, now: Duration) -> Bool {
        guard let schema, let series = schema.series(for: sample) else { return false }
        switch series {
        case .success(let series):
            return record(series: series, timestamp: Timestamp(date: sample.startedAt), now: now) { fields in
                schema.writeFields(of: sample, to: &fields)
            }
        case .failure:
            countInvalid()
            return false
        }
    }

    /// Queues a sample to be encoded (built first, for a `.request` one) at the next drain,
    /// off the caller's path: the write-through loop drains every 20 ms, every reader of the batches
    /// (metrics, pending lines, sealing before a send, flushing, shutdown) drains first, and the
    /// caller that queues the ``maximumDeferred``th sample drains them all. `now` is when the request
    /// ended, for batching.
    /// Once intake has closed, a sample is dropped (and counted) at once.
    func deferRecord(now: Duration, _ source: DeferredSample.Source) {
        let waiting = deferred.withLock { queue -> Int? in
            if queue.isClosed { return nil }
            queue.samples.append(DeferredSample(now: now, source: source))
            return queue.samples.count
        }
        guard let waiting else {
            state.withLock { $0.metrics.pointsDropped += 1 }
            return
        }
        if waiting >= Self.maximumDeferred { drainDeferred() }
    }

    /// Builds and encodes every deferred sample, in the order they were queued.
    func drainDeferred() {
        drainMutex.lock()
        defer { drainMutex.unlock() }
        let samples = deferred.withLock { queue -> [DeferredSample] in
            guard !queue.samples.isEmpty else { return [] }
            // The next queue starts with room for as many as this one held.
            var taken: [DeferredSample] = []
            taken.reserveCapacity(queue.samples.count)
            swap(&taken, &queue.samples)
            return taken
        }
        let correlationHeaders = schema?.correlationHeaders ?? []
        for deferred in samples {
            if let sample = deferred.sample(correlationHeaders: correlationHeaders) {
                record(sample, now: deferred.now)
            }
        }
    }

    /// Counts points whose values were changed on their way out (see ``Shipper``).
    func countRepaired(_ points: Int) {
        state.withLock { $0.metrics.pointsRepaired += UInt64(points) }
    }

    /// Counts a sample that could not become a line at all.
    func countInvalid() {
        state.withLock { $0.metrics.pointsInvalid += 1 }
    }

    /// Runs `encode` on the open batch's bytes (opening one if needed), then counts, seals and caps.
    private func append(
        now: Duration,
        _ encode: (inout [UInt8], inout RecentInstants) throws(LineProtocolError) -> LineEncoder.Repairs
    ) -> Bool {
        var wake = false
        var filledOne = false
        let accepted = state.withLock { state -> Bool in
            if state.isClosed {
                state.metrics.pointsDropped += 1
                return false
            }
            if state.batches.isEmpty || state.batches[state.batches.count - 1].isSealed {
                let segment = String(format: "%020llu", state.nextSequence)
                state.nextSequence += 1
                state.batches.append(
                    PendingBatch(
                        segment: segment,
                        bytes: state.newBuffer(),
                        lineCount: 0,
                        firstLineAt: now,
                        lastLineAt: now
                    )
                )
                wake = true
            }
            let last = state.batches.count - 1
            let before = state.batches[last].bytes.count
            let repairs: LineEncoder.Repairs
            do {
                // In place: the batch's array is uniquely referenced, so the encoder appends to it.
                repairs = try encode(&state.batches[last].bytes, &state.recentInstants)
            } catch {
                // A declined timestamp: the series has no free instant near the point's time.
                if (error as? LineProtocolError) == .timestampDeclined {
                    state.metrics.pointsDropped += 1
                } else {
                    state.metrics.pointsInvalid += 1
                }
                if state.batches[last].lineCount == 0 { state.batches.removeLast() }
                return false
            }
            if !repairs.isEmpty { state.metrics.pointsRepaired += 1 }
            let (added, isFull) = Self.countLine(in: &state.batches[last], before: before, now: now, batching: batching)
            state.pendingBytes += added
            state.metrics.pointsRecorded += 1
            if isFull {
                state.seal(last)
                wake = true
                filledOne = true
            }
            if state.pendingBytes > batching.maximumPendingBytes {
                Self.dropOldest(&state, cap: batching.maximumPendingBytes)
            }
            return true
        }
        if wake { wakeup.signal() }
        if filledOne { filled.signal() }
        return accepted
    }

    /// Counts the line just appended to `batch` (which held `before` bytes): the bytes it added, and
    /// whether the batch is now full.
    @inline(__always)
    private static func countLine(
        in batch: inout PendingBatch,
        before: Int,
        now: Duration,
        batching: APIHealthConfiguration.Batching
    ) -> (added: Int, isFull: Bool) {
        batch.lineCount += 1
        batch.lastLineAt = now
        let isFull = batch.lineCount >= batching.maximumLines || batch.bytes.count >= batching.maximumBytes
        return (batch.bytes.count - before, isFull)
    }

    private static func dropOldest(_ state: inout State, cap: Int) {
        while state.pendingBytes > cap && state.batches.count > 1 {
            let dropped = state.batches.removeFirst()
            state.pendingBytes -= dropped.lineBytes
            state.metrics.pointsDropped += UInt64(dropped.lineCount)
            state.spool?.remove(dropped.segment)
        }
    }

    // MARK: Sealing and sending

    /// Seals the open batch if its debounce or maximum age has passed. Returns when it next falls due.
    func sealDue(now: Duration) -> Duration? {
        drainDeferred()
        return state.withLock { state -> Duration? in
            guard let last = state.batches.indices.last, !state.batches[last].isSealed else { return nil }
            let batch = state.batches[last]
            let due = min(batch.lastLineAt + batching.flushDelay, batch.firstLineAt + batching.maximumAge)
            if state.isClosed || now >= due {
                state.seal(last)
                return nil
            }
            return due
        }
    }

    /// Seals the open batch now (`flush()` and shutdown).
    func sealOpenBatch() {
        drainDeferred()
        state.withLock { state in
            if let last = state.batches.indices.last { state.seal(last) }
        }
        wakeup.signal()
    }

    /// The oldest sealed batch if it may be sent at `now`, or how long to wait.
    func next(now: Duration, openDeadline: Duration?) -> NextSend {
        state.withLock { state -> NextSend in
            guard let head = state.batches.first, head.isSealed else { return .wait(until: openDeadline) }
            if let notBefore = head.notBefore, notBefore > now {
                return .wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore)
            }
            mergeHead(&state)
            let first = state.batches[0]
            return .send(
                segment: first.segment,
                body: first.body,
                lineCount: first.lineCount,
                lineBytes: first.lineBytes
            )
        }
    }

    /// The gzip body of batch `segment`: the one kept, or one `makeBody` makes of its lines (outside
    /// the lock), kept for the batch's retries. `nil` if the batch is gone or `makeBody` failed.
    func body(of segment: String, making makeBody: ([UInt8]) -> [UInt8]?) -> [UInt8]? {
        let kept = state.withLock { state -> (body: [UInt8]?, lines: [UInt8])? in
            guard let batch = state.batches.first(where: { $0.segment == segment }) else { return nil }
            return (batch.body, batch.bytes)
        }
        guard var kept else { return nil }
        if let body = kept.body { return body }
        return makeAndKeepBody(of: segment, from: &kept.lines, makeBody)
    }

    /// Makes the gzip bodies of the sealed batches waiting behind the head, newest first (the shipper
    /// makes the head's as it sends it), so a backlog is held compressed: once a batch's lines are on
    /// disk (or there is no spool), only its body stays in memory and its buffer is reused. Stops at
    /// the first body `makeBody` fails to make.
    func makeWaitingBodies(_ makeBody: ([UInt8]) -> [UInt8]?) {
        while true {
            let next = state.withLock { state -> (segment: String, lines: [UInt8])? in
                guard state.batches.count > 1 else { return nil }
                for index in state.batches.indices.dropFirst().reversed() {
                    let batch = state.batches[index]
                    if batch.isSealed && batch.body == nil { return (batch.segment, batch.bytes) }
                }
                return nil
            }
            guard var next, makeAndKeepBody(of: next.segment, from: &next.lines, makeBody) != nil else { return }
        }
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
        state.withLock { state in
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }),
                state.batches[index].body == nil
            else { return }
            state.batches[index].body = body
            state.releaseLines(index)
        }
        return body
    }

    /// Joins the sealed batches waiting behind the head into it, within the batch limits, so a backlog
    /// (many small batches cut while the server was away) goes out in few requests.
    private func mergeHead(_ state: inout State) {
        func mergeable(_ batch: PendingBatch) -> Bool {
            batch.isSealed && !batch.isSplitHalf && (state.spool == nil || batch.isSpoolSealed)
        }
        guard mergeable(state.batches[0]) else { return }
        var count = 1
        var lines = state.batches[0].lineCount
        var size = state.batches[0].lineBytes
        while count < state.batches.count, mergeable(state.batches[count]),
            lines + state.batches[count].lineCount <= batching.maximumLines,
            size + state.batches[count].lineBytes <= batching.maximumBytes
        {
            lines += state.batches[count].lineCount
            size += state.batches[count].lineBytes
            count += 1
        }
        guard count > 1 else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        for batch in state.batches[0..<count] {
            // Lines only in a body are unpacked; one that cannot be stays a batch of its own.
            guard let batchLines = batch.lines() else { return }
            bytes += batchLines
        }
        var merged = state.batches[0]
        merged.body = nil
        merged.linesOnlyInBody = nil
        let lastStem = state.batches[count - 1].segment
        merged.segment = Self.leadingSequence(lastStem) + "-" + String(format: "%020llu", state.nextSequence)
        merged.bytes = bytes
        merged.lineCount = lines
        merged.spooledBytes = size
        merged.lastLineAt = state.batches[count - 1].lastLineAt
        if let spool = state.spool {
            do {
                try spool.writeSealed(merged.segment, bytes: bytes)
            } catch {
                state.countSpoolFailure(error)
                return
            }
            for batch in state.batches[0..<count] { spool.remove(batch.segment) }
        }
        state.nextSequence += 1
        state.batches.replaceSubrange(0..<count, with: [merged])
    }

    /// The sequence number a segment name starts with (its send order).
    static func leadingSequence(_ stem: String) -> String { String(stem.prefix { $0.isNumber }) }

    /// The server stored the batch.
    func acknowledge(_ segment: String, sentBytes: Int, compressedBytes: Int) {
        state.withLock { state in
            state.metrics.batchesWritten += 1
            state.metrics.bytesBeforeGzip += UInt64(sentBytes)
            state.metrics.bytesAfterGzip += UInt64(compressedBytes)
            state.metrics.lastError = nil
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return }
            var batch = state.batches.remove(at: index)
            state.pendingBytes -= batch.lineBytes
            state.metrics.pointsWritten += UInt64(batch.lineCount)
            state.spool?.remove(segment)
            state.reuse(&batch.bytes)
        }
    }

    /// The server refused the batch for good: it moves to `rejected/` with `reason`.
    func reject(_ segment: String, reason: String, expired: Bool = false, count: Int? = nil) {
        state.withLock { state in
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return }
            let batch = state.batches.remove(at: index)
            state.pendingBytes -= batch.lineBytes
            let lines = UInt64(min(count ?? batch.lineCount, batch.lineCount))
            if expired { state.metrics.pointsExpired += lines } else { state.metrics.pointsRejected += lines }
            state.metrics.lastError = reason
            guard let spool = state.spool else { return }
            // Lines that cannot be unpacked from the body stay in their spool file, read again at the
            // next start.
            guard let batchLines = batch.lines() else { return }
            do {
                try spool.reject(segment, bytes: batchLines, reason: reason)
            } catch {
                state.countSpoolFailure(error)
            }
        }
    }

    /// Splits a batch into two halves on a line boundary (after a 413). `false` for a single line.
    func split(_ segment: String) -> Bool {
        state.withLock { state -> Bool in
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return false }
            var batch = state.batches[index]
            guard batch.lineCount > 1, let lines = batch.lines() else { return false }
            batch.bytes = lines
            batch.body = nil
            batch.linesOnlyInBody = nil
            // Line ends inside string values are not line boundaries: count lines with the splitter.
            var boundaries: [Int] = []
            batch.bytes.withUnsafeBufferPointer { buffer in
                for line in LineSplitter(buffer) { boundaries.append(line.range.upperBound + 1) }
            }
            let cut = boundaries[boundaries.count / 2 - 1 + boundaries.count % 2]
            var first = batch
            first.isSplitHalf = true
            first.segment = segment + "-1"
            first.bytes = Array(batch.bytes[..<cut])
            first.lineCount = boundaries.count / 2 + boundaries.count % 2
            first.spooledBytes = first.bytes.count
            first.isSpoolSealed = true
            var second = first
            second.segment = segment + "-2"
            second.bytes = Array(batch.bytes[cut...])
            second.lineCount = batch.lineCount - first.lineCount
            second.spooledBytes = second.bytes.count
            state.batches.replaceSubrange(index...index, with: [first, second])
            if let spool = state.spool {
                do {
                    try spool.writeSealed(first.segment, bytes: first.bytes)
                    try spool.writeSealed(second.segment, bytes: second.bytes)
                    spool.remove(segment)
                } catch {
                    // The whole batch stays on disk; the halves are still sent from memory.
                    state.countSpoolFailure(error)
                }
            }
            return true
        }
    }

    /// Schedules the batch again at `notBefore`. Returns `false` when it has been failing for longer
    /// than `retryLimit` (it is then set aside as expired).
    func scheduleRetry(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?
    ) -> Bool {
        let keep = state.withLock { state -> Bool in
            state.metrics.retries += 1
            state.metrics.lastError = error
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return true }
            state.batches[index].attempts += 1
            state.batches[index].notBefore = notBefore
            let since = state.batches[index].failingSince ?? now
            state.batches[index].failingSince = since
            if let retryLimit, now - since > retryLimit { return false }
            return true
        }
        if !keep { reject(segment, reason: "still failing after the retry limit: \(error)", expired: true) }
        return keep
    }

    /// The number of times the head batch has failed.
    func attempts(of segment: String) -> Int {
        state.withLock { state in state.batches.first(where: { $0.segment == segment })?.attempts ?? 0 }
    }

    // MARK: Shutdown

    /// Stops intake: later points are dropped and counted. The open batch is sealed.
    func close() {
        deferred.withLock { $0.isClosed = true }
        drainDeferred()
        state.withLock { state in
            state.isClosed = true
            if let last = state.batches.indices.last { state.seal(last) }
        }
        wakeup.signal()
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// No batch is pending.
    var isDrained: Bool {
        drainDeferred()
        return state.withLock { $0.batches.isEmpty }
    }

    /// Retry waits of every batch end now (shutdown sends what is pending without waiting out backoff).
    func clearRetryWaits() {
        state.withLock { state in
            for index in state.batches.indices { state.batches[index].notBefore = nil }
        }
        wakeup.signal()
    }

    // MARK: Spool

    /// Writes what was recorded since the last call through to the spool files; seals files of sealed
    /// batches. Called every few milliseconds. The new bytes are copied out under the lock and written
    /// outside it, so recording never waits for the disk. `logFailure` is called once, with the first
    /// spool failure; later ones are only counted (``AgentMetrics/spoolWriteErrors``).
    func writeThrough(logFailure: (String) -> Void) {
        drainDeferred()
        writeThroughMutex.lock()
        defer { writeThroughMutex.unlock() }
        typealias Work = (segment: String, bytes: [UInt8], start: Int, end: Int, seals: Bool)
        let (spool, work) = state.withLock { state -> (SpoolDirectory?, [Work]) in
            guard let spool = state.spool else { return (nil, []) }
            var work: [Work] = []
            for batch in state.batches
            where batch.spooledBytes < batch.bytes.count || (batch.isSealed && !batch.isSpoolSealed) {
                work.append(
                    (
                        batch.segment, Array(batch.bytes[batch.spooledBytes...]), batch.spooledBytes, batch.bytes.count,
                        batch.isSealed
                    )
                )
            }
            return (spool, work)
        }
        var written: [(segment: String, end: Int, sealed: Bool)] = []
        var failures: [SpoolError] = []
        if let spool {
            for item in work {
                do throws(SpoolError) {
                    if !item.bytes.isEmpty {
                        do throws(SpoolError) {
                            try spool.append(item.bytes[...], to: item.segment)
                        } catch {
                            // Nothing of the chunk stays on disk: the next attempt starts where the file ends.
                            written.append((item.segment, spool.committedLength(of: item.segment), false))
                            throw error
                        }
                        written.append((item.segment, item.end, false))
                    }
                    if item.seals {
                        try spool.seal(item.segment)
                        written.append((item.segment, item.end, true))
                    }
                } catch {
                    failures.append(error)
                }
            }
        }
        let report = state.withLock { state -> String? in
            for item in written {
                guard let index = state.batches.firstIndex(where: { $0.segment == item.segment }) else { continue }
                state.batches[index].spooledBytes = item.end
                if item.sealed {
                    state.batches[index].isSpoolSealed = true
                    state.releaseLines(index)
                }
            }
            for failure in failures { state.countSpoolFailure(failure) }
            guard let message = state.unreportedSpoolFailure else { return nil }
            state.unreportedSpoolFailure = nil
            state.spoolFailureReported = true
            return message
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
        return state.withLock { state -> [SpoolProblem] in
            var problems: [SpoolProblem] = []
            var sources: [(stem: String, lines: [[UInt8]], clean: Bool)] = []
            for segment in segments {
                problems += segment.problems
                let stem = String(
                    segment.name.dropLast((segment.isOpen ? SpoolReader.openSuffix : SpoolReader.sealedSuffix).count)
                )
                for part in stem.split(separator: "-") {
                    if let sequence = UInt64(part) { state.nextSequence = max(state.nextSequence, sequence + 1) }
                }
                if segment.isSkipped { continue }
                sources.append((stem, segment.lines, !segment.isOpen && segment.problems.isEmpty))
            }
            // Cut every restored line into batches within the limits, in order.
            var batches: [(lines: ArraySlice<[UInt8]>, source: Int, sources: Range<Int>)] = []
            var all: [[UInt8]] = []
            var owner: [Int] = []
            for (index, source) in sources.enumerated() {
                all += source.lines
                owner += Array(repeating: index, count: source.lines.count)
            }
            var start = 0
            while start < all.count {
                var end = start
                var size = 0
                while end < all.count && end - start < batching.maximumLines
                    && (end == start || size + all[end].count + 1 <= batching.maximumBytes)
                {
                    size += all[end].count + 1
                    end += 1
                }
                batches.append((all[start..<end], owner[start], owner[start]..<(owner[end - 1] + 1)))
                start = end
            }
            var replaced = Set<Int>()
            var kept = Set<Int>()
            for batch in batches {
                let source = sources[batch.source]
                var bytes: [UInt8] = []
                bytes.reserveCapacity(batch.lines.reduce(0) { $0 + $1.count + 1 })
                for line in batch.lines {
                    bytes += line
                    bytes.append(UInt8(ascii: "\n"))
                }
                var stem = source.stem
                let whole = batch.sources.count == 1 && batch.lines.count == source.lines.count
                if !(whole && source.clean) {
                    stem = String(format: "%020llu", state.nextSequence)
                    state.nextSequence += 1
                    do {
                        try state.spool?.writeSealed(stem, bytes: bytes)
                        replaced.formUnion(batch.sources)
                    } catch {
                        state.countSpoolFailure(error)
                        kept.formUnion(batch.sources)
                    }
                }
                state.batches.append(
                    PendingBatch(
                        segment: stem,
                        bytes: bytes,
                        lineCount: batch.lines.count,
                        isSealed: true,
                        firstLineAt: .zero,
                        lastLineAt: .zero,
                        spooledBytes: bytes.count,
                        isSpoolSealed: true
                    )
                )
                state.pendingBytes += bytes.count
            }
            for (index, source) in sources.enumerated()
            where (replaced.contains(index) || source.lines.isEmpty) && !kept.contains(index) {
                state.spool?.remove(source.stem)
            }
            state.metrics.spoolLinesLeftOut += UInt64(
                problems.filter { if case .skippedEntry = $0.kind { false } else { true } }.count
            )
            if state.pendingBytes > batching.maximumPendingBytes {
                Self.dropOldest(&state, cap: batching.maximumPendingBytes)
            }
            return problems
        }
    }

    /// Writes what is left through and releases the spool (and its lock) after shutdown. Returns the
    /// number of pending points that are neither delivered nor on disk: lost when the process exits
    /// (also counted in ``AgentMetrics/pointsLost``).
    @discardableResult
    func releaseSpool(logFailure: (String) -> Void = { _ in }) -> UInt64 {
        writeThrough(logFailure: logFailure)
        return state.withLock { state -> UInt64 in
            var lost: UInt64 = 0
            for batch in state.batches {
                if state.spool == nil || batch.spooledBytes == 0 {
                    lost += UInt64(batch.lineCount)
                } else if batch.spooledBytes < batch.bytes.count {
                    batch.bytes[batch.spooledBytes...].withUnsafeBufferPointer { buffer in
                        for line in LineSplitter(buffer) where !line.range.isEmpty { lost += 1 }
                    }
                }
            }
            state.metrics.pointsLost += lost
            state.spool = nil
            return lost
        }
    }

    /// Memory held by the pending batches' lines and bodies and the spare buffers, spare capacity
    /// included (for tests and diagnostics).
    var reservedBytes: Int {
        state.withLock { state in
            state.batches.reduce(0) { $0 + $1.bytes.capacity + ($1.body?.capacity ?? 0) }
                + state.spareBuffers.reduce(0) { $0 + $1.capacity }
        }
    }

    /// Every pending line, oldest first (for tests and diagnostics).
    func pendingBytes() -> [UInt8] {
        drainDeferred()
        return state.withLock { state in state.batches.flatMap { $0.lines() ?? [] } }
    }

    // MARK: Metrics

    var metrics: AgentMetrics {
        drainDeferred()
        return state.withLock { state in
            var metrics = state.metrics
            metrics.pendingLines = state.batches.reduce(0) { $0 + $1.lineCount }
            metrics.pendingBytes = state.pendingBytes
            return metrics
        }
    }
}
