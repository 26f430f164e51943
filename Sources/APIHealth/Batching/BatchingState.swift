import LineProtocol

/// One batch of encoded lines, open (still filling) or sealed (ready to send).
struct PendingBatch {
    /// Sorts in send order; also the spool file's stem (see ``SegmentName``).
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
    /// When its sends began to fail (for the retry limit).
    var failingSince: Duration?
    /// Whether the batches behind it may be joined into it before it is sent: not for a half of a batch
    /// the server found too large, nor after a join failed.
    var mayMerge = true

    /// Bytes of line protocol in the batch.
    var lineBytes: Int { linesOnlyInBody ?? bytes.count }

    /// What the lines are held as, for work done outside the lock.
    var contents: BatchContents { BatchContents(bytes: bytes, body: linesOnlyInBody == nil ? nil : body) }
}

/// A batch's lines as taken out of the state: the bytes themselves, or the gzip body that alone holds them.
struct BatchContents {
    var bytes: [UInt8]
    /// Set when only the body holds the lines.
    var body: [UInt8]?

    /// The lines, unpacked from the body when only it holds them; `nil` if that fails.
    func lines() -> [UInt8]? {
        guard let body else { return bytes }
        return try? Gzip.decompress(body)
    }
}

/// What the shipper should do next.
enum NextSend: Equatable {
    /// Send the batch `segment`: its gzip body if made already.
    case send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int)
    /// Nothing to send before `deadline` (`nil`: until something is recorded).
    case wait(until: Duration?)
}

/// What the head of the batches needs next.
enum HeadStep: Equatable {
    case next(NextSend)
    /// Join the head batch and the ones behind it (outside the lock), then ask again.
    case merge(MergePlan)
}

/// Sealed batches at the head to join into one, within the batch limits.
struct MergePlan: Equatable {
    /// The batches joined, oldest first.
    var sources: [String]
    /// Their lines, in the same order.
    var contents: [BatchContents]
    /// The name of the joined batch: its last source's sequence first, so it keeps its place.
    var segment: String
    var lineCount: Int
    var lineBytes: Int

    static func == (lhs: MergePlan, rhs: MergePlan) -> Bool { lhs.segment == rhs.segment && lhs.sources == rhs.sources }
}

/// The two halves of a batch the server found too large, made outside the lock.
struct SplitHalves {
    var first: [UInt8]
    var firstLines: Int
    var second: [UInt8]
    var secondLines: Int

    /// Cuts `lines` (whole lines, `count` of them) in two on a line boundary; `nil` for a single line.
    init?(_ lines: [UInt8], count: Int) {
        guard count > 1 else { return nil }
        // Line ends inside string values are not line boundaries: count lines with the splitter.
        var boundaries: [Int] = []
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) { boundaries.append(line.range.upperBound + 1) }
        }
        guard boundaries.count > 1 else { return nil }
        let firstCount = boundaries.count / 2 + boundaries.count % 2
        let cut = min(boundaries[firstCount - 1], lines.count)
        first = Array(lines[..<cut])
        firstLines = firstCount
        second = Array(lines[cut...])
        secondLines = count - firstCount
    }
}

/// Writing through to the spool: what the spool worker writes, seals and removes in one round.
struct SpoolWork {
    struct Append {
        var segment: String
        /// The bytes recorded since the last round (empty when the round only seals the file), copied:
        /// a slice would share the open batch's buffer, which the next line recorded would then copy.
        var bytes: [UInt8]
        /// Where the batch's bytes end once they are written.
        var end: Int
        var seals: Bool
    }

    var appends: [Append] = []
    /// Files of batches delivered, dropped, merged or split: removed after the appends.
    var removals: [String] = []

    var isEmpty: Bool { appends.isEmpty && removals.isEmpty }
}

/// What one round of the spool worker achieved.
struct SpoolProgress {
    var written: [(segment: String, end: Int, sealed: Bool)] = []
    var failures: [SpoolError] = []
}

/// The pending batches as a plain value: every change is an event (a line recorded, a flush due, a
/// batch sent, answered, merged or split, the spool written), and what an event needs done outside the
/// lock (gzip, spool files, sends) comes back as its result. ``PendingBatches`` holds it behind the
/// lock `record` takes and runs that work after releasing it, so recording never waits for the disk,
/// gzip or the network; the tests drive it alone, with no disk or network.
///
/// Invariants (checked by the property tests): every recorded line is pending, written, dropped,
/// rejected or expired, each once; batches go out in the order their lines were recorded; pending
/// bytes stay within the cap but for the one batch being filled or sent.
struct BatchingState {
    private(set) var batches: [PendingBatch] = []
    private(set) var nextSequence: UInt64 = 1
    /// Bytes of line protocol pending (what the cap is on).
    private(set) var pendingBytes = 0
    var metrics = AgentMetrics()
    var recentInstants: RecentInstants
    private(set) var isClosed = false
    /// Whether the batches are mirrored in a spool directory.
    private(set) var hasSpool: Bool
    let limits: APIHealthConfiguration.Batching
    /// The destination's retry schedule: no send before `retryNotBefore`; failed attempts in a row.
    /// It belongs to the destination, not to a batch, so dropping the head at the cap keeps it.
    private(set) var retryNotBefore: Duration?
    private(set) var failedAttempts = 0
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

    init(limits: APIHealthConfiguration.Batching, precision: Precision, hasSpool: Bool) {
        self.limits = limits
        self.hasSpool = hasSpool
        recentInstants = RecentInstants(precision: precision)
        bufferCapacity = min(limits.maximumBytes, 16 << 20) + 64 * 1_024
    }

    // MARK: Recording

    /// What recording a line changed, for the waits to signal.
    struct Appended {
        var accepted = false
        /// A batch was opened or sealed: the shipper's wait may end sooner.
        var wakesShipper = false
        /// A batch was sealed by its size: the spool worker writes it through and makes its body now.
        var sealedFull = false
        /// Batches were dropped at the cap: the spool worker removes their files.
        var dropped = false
    }

    /// A line: `encode` appends it to the open batch's bytes (a batch is opened if none is). A line
    /// it refuses is counted as invalid, or as dropped when its series has no free instant.
    @inline(__always)
    mutating func append(
        now: Duration,
        _ encode: (inout [UInt8], inout RecentInstants) throws(LineProtocolError) -> LineEncoder.Repairs
    ) -> Appended {
        var result = Appended()
        if isClosed {
            metrics.pointsDropped += 1
            return result
        }
        if batches.isEmpty || batches[batches.count - 1].isSealed {
            batches.append(
                PendingBatch(
                    segment: SegmentName.sequence(takeSequence()),
                    bytes: newBuffer(),
                    lineCount: 0,
                    firstLineAt: now,
                    lastLineAt: now
                )
            )
            result.wakesShipper = true
        }
        let last = batches.count - 1
        let before = batches[last].bytes.count
        let repairs: LineEncoder.Repairs
        do {
            // In place: the batch's array is uniquely referenced, so the encoder appends to it.
            repairs = try encode(&batches[last].bytes, &recentInstants)
        } catch {
            // A declined timestamp: the series has no free instant near the point's time.
            if error == .timestampDeclined {
                metrics.pointsDropped += 1
            } else {
                metrics.pointsInvalid += 1
            }
            if batches[last].lineCount == 0 { batches.removeLast() }
            return result
        }
        result.accepted = true
        if !repairs.isEmpty { metrics.pointsRepaired += 1 }
        batches[last].lineCount += 1
        batches[last].lastLineAt = now
        pendingBytes += batches[last].bytes.count - before
        metrics.pointsRecorded += 1
        if batches[last].lineCount >= limits.maximumLines || batches[last].bytes.count >= limits.maximumBytes {
            seal(last)
            result.wakesShipper = true
            result.sealedFull = true
        }
        if pendingBytes > limits.maximumPendingBytes { result.dropped = dropOldest() }
        return result
    }

    /// Counts points whose values were changed on their way out.
    mutating func countRepaired(_ points: Int) { metrics.pointsRepaired += UInt64(points) }

    /// Counts a sample that could not become a line at all.
    mutating func countInvalid() { metrics.pointsInvalid += 1 }

    /// Counts a point dropped before it became a line (recorded after intake closed).
    mutating func countDropped() { metrics.pointsDropped += 1 }

    /// Drops the oldest batches while pending data is over the cap, keeping the newest; their spool
    /// files go to the spool worker. The retry schedule is the destination's, so it stays.
    private mutating func dropOldest() -> Bool {
        var dropped = false
        while pendingBytes > limits.maximumPendingBytes && batches.count > 1 {
            let batch = batches.removeFirst()
            pendingBytes -= batch.lineBytes
            metrics.pointsDropped += UInt64(batch.lineCount)
            if hasSpool { spoolRemovals.append(batch.segment) }
            dropped = true
        }
        return dropped
    }

    private mutating func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    // MARK: Sealing

    /// Seals the open batch if its debounce or maximum age has passed. Returns when it next falls due.
    mutating func sealDue(now: Duration) -> Duration? {
        guard let last = batches.indices.last, !batches[last].isSealed else { return nil }
        let batch = batches[last]
        let due = min(batch.lastLineAt + limits.flushDelay, batch.firstLineAt + limits.maximumAge)
        if isClosed || now >= due {
            seal(last)
            return nil
        }
        return due
    }

    /// Seals the open batch now (`flush()` and shutdown).
    mutating func sealOpenBatch() {
        if let last = batches.indices.last { seal(last) }
    }

    /// Seals batch `index` and gives back the room reserved for it to grow when that is more than an
    /// eighth of its bytes (a batch sealed by its size has little left; one sealed early, by the flush
    /// delay, has most of it), so pending memory follows the pending cap.
    private mutating func seal(_ index: Int) {
        guard !batches[index].isSealed else { return }
        batches[index].isSealed = true
        var bytes = batches[index].bytes
        if bytes.capacity - bytes.count > bytes.count / 8 {
            batches[index].bytes = []
            batches[index].bytes = Self.exactCopy(bytes[...])
            reuse(&bytes)
        }
    }

    // MARK: Sending

    /// The oldest sealed batch if it may be sent at `now`, a join of the batches at the head to make
    /// first, or how long to wait.
    mutating func nextSend(now: Duration, openDeadline: Duration?) -> HeadStep {
        guard let head = batches.first, head.isSealed else { return .next(.wait(until: openDeadline)) }
        if let notBefore = retryNotBefore, notBefore > now {
            return .next(.wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore))
        }
        if let plan = mergePlan() { return .merge(plan) }
        return .next(
            .send(segment: head.segment, body: head.body, lineCount: head.lineCount, lineBytes: head.lineBytes)
        )
    }

    /// The sealed batches waiting behind the head that fit into it within the batch limits, so a
    /// backlog (many small batches cut while the server was away) goes out in few requests.
    private mutating func mergePlan() -> MergePlan? {
        func mergeable(_ batch: PendingBatch) -> Bool {
            batch.isSealed && batch.mayMerge && (!hasSpool || batch.isSpoolSealed)
        }
        guard mergeable(batches[0]) else { return nil }
        var count = 1
        var lines = batches[0].lineCount
        var size = batches[0].lineBytes
        while count < batches.count, mergeable(batches[count]),
            lines + batches[count].lineCount <= limits.maximumLines,
            size + batches[count].lineBytes <= limits.maximumBytes
        {
            lines += batches[count].lineCount
            size += batches[count].lineBytes
            count += 1
        }
        guard count > 1 else { return nil }
        let sources = batches[0..<count]
        return MergePlan(
            sources: sources.map(\.segment),
            contents: sources.map(\.contents),
            segment: SegmentName.merged(last: sources[sources.endIndex - 1].segment, sequence: takeSequence()),
            lineCount: lines,
            lineBytes: size
        )
    }

    /// The join of `plan` is made (`lines`, written to the spool as a sealed file when `written`), or
    /// could not be (`nil`). It replaces its sources if they are still the head; otherwise (one was
    /// dropped meanwhile) it is let go. Its sources' files, or its own, go to the spool worker.
    mutating func merged(_ plan: MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?) {
        if let failure { countSpoolFailure(failure) }
        let stillHead =
            batches.count >= plan.sources.count && zip(batches, plan.sources).allSatisfy { $0.segment == $1 }
        guard let lines, stillHead, !hasSpool || written else {
            if written { spoolRemovals.append(plan.segment) }
            // Sent as it is: a join that failed is not tried again for this head.
            if !batches.isEmpty, batches[0].segment == plan.sources[0] { batches[0].mayMerge = false }
            return
        }
        var merged = batches[0]
        merged.segment = plan.segment
        merged.bytes = lines
        merged.body = nil
        merged.linesOnlyInBody = nil
        merged.lineCount = plan.lineCount
        merged.spooledBytes = lines.count
        merged.isSpoolSealed = true
        merged.lastLineAt = batches[plan.sources.count - 1].lastLineAt
        pendingBytes += lines.count - plan.lineBytes
        batches.replaceSubrange(0..<plan.sources.count, with: [merged])
        if hasSpool { spoolRemovals += plan.sources }
    }

    /// The body kept for batch `segment`, or its lines to make one of; `nil` if the batch is gone.
    func bodyOrLines(of segment: String) -> (body: [UInt8]?, lines: [UInt8])? {
        guard let batch = batches.first(where: { $0.segment == segment }) else { return nil }
        return (batch.body, batch.bytes)
    }

    /// The newest sealed batch behind the head without a body: the next one to compress.
    func nextWaitingWithoutBody() -> (segment: String, lines: [UInt8])? {
        guard batches.count > 1 else { return nil }
        for index in batches.indices.dropFirst().reversed() where batches[index].isSealed && batches[index].body == nil
        {
            return (batches[index].segment, batches[index].bytes)
        }
        return nil
    }

    /// Batch `segment`'s body is made: kept for its sends, and its lines let go once they are on disk.
    mutating func keepBody(_ body: [UInt8], of segment: String) {
        guard let index = batches.firstIndex(where: { $0.segment == segment }), batches[index].body == nil else {
            return
        }
        batches[index].body = body
        releaseLines(index)
    }

    /// The server stored batch `segment`. Its file goes to the spool worker.
    mutating func delivered(_ segment: String, sentBytes: Int, compressedBytes: Int) {
        metrics.batchesWritten += 1
        metrics.bytesBeforeGzip += UInt64(sentBytes)
        metrics.bytesAfterGzip += UInt64(compressedBytes)
        metrics.lastError = nil
        retryNotBefore = nil
        failedAttempts = 0
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return }
        var batch = batches.remove(at: index)
        pendingBytes -= batch.lineBytes
        metrics.pointsWritten += UInt64(batch.lineCount)
        if hasSpool { spoolRemovals.append(segment) }
        reuse(&batch.bytes)
    }

    /// The server refused batch `segment` for good (or it failed past the retry limit): it leaves the
    /// pending batches and is counted. Returns its lines for `rejected/`, to be written outside the lock
    /// (`nil` if the batch is gone or there is no spool).
    mutating func refused(_ segment: String, reason: String, expired: Bool, count: Int?) -> BatchContents? {
        metrics.lastError = reason
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return nil }
        let batch = batches.remove(at: index)
        pendingBytes -= batch.lineBytes
        let refused = UInt64(min(count ?? batch.lineCount, batch.lineCount))
        if expired { metrics.pointsExpired += refused } else { metrics.pointsRejected += refused }
        // A partial write (InfluxDB 1.x answers `dropped=N`): the server stored the other lines.
        metrics.pointsWritten += UInt64(batch.lineCount) - refused
        return hasSpool ? batch.contents : nil
    }

    /// The lines of batch `segment` to split after a 413, and how many there are; `nil` if it is gone.
    func splitSource(_ segment: String) -> (contents: BatchContents, lineCount: Int)? {
        guard let batch = batches.first(where: { $0.segment == segment }) else { return nil }
        return (batch.contents, batch.lineCount)
    }

    /// Batch `segment` is cut into `halves` (written to the spool as `first`/`second` when `written`):
    /// they replace it, never joined again. If it is gone meanwhile, the halves' files are let go.
    mutating func split(
        _ segment: String,
        into halves: SplitHalves,
        names: (first: String, second: String),
        written: Bool,
        failure: SpoolError?
    ) {
        if let failure { countSpoolFailure(failure) }
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else {
            if written { spoolRemovals += [names.first, names.second] }
            return
        }
        var first = batches[index]
        first.mayMerge = false
        first.body = nil
        first.linesOnlyInBody = nil
        first.segment = names.first
        first.bytes = halves.first
        first.lineCount = halves.firstLines
        first.spooledBytes = halves.first.count
        first.isSpoolSealed = true
        var second = first
        second.segment = names.second
        second.bytes = halves.second
        second.lineCount = halves.secondLines
        second.spooledBytes = halves.second.count
        pendingBytes += halves.first.count + halves.second.count - batches[index].lineBytes
        batches.replaceSubrange(index...index, with: [first, second])
        // The whole batch stays on disk when the halves could not be written; they still go from memory.
        if hasSpool && written { spoolRemovals.append(segment) }
    }

    /// A send of batch `segment` failed: the destination waits until `notBefore`. Returns `false` when
    /// the batch has been failing for longer than `retryLimit` (the caller then refuses it as expired).
    mutating func failed(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?
    ) -> Bool {
        metrics.retries += 1
        metrics.lastError = error
        failedAttempts += 1
        retryNotBefore = notBefore
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return true }
        let since = batches[index].failingSince ?? now
        batches[index].failingSince = since
        if let retryLimit, now - since > retryLimit { return false }
        return true
    }

    /// Retry waits end now (shutdown sends what is pending without waiting out backoff).
    mutating func clearRetryWait() { retryNotBefore = nil }

    // MARK: Spool

    /// What the spool worker writes this round: the bytes recorded since the last one, the seals of
    /// sealed batches, and the files to remove.
    mutating func takeSpoolWork() -> SpoolWork {
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
    mutating func spoolWritten(_ progress: SpoolProgress) -> String? {
        for item in progress.written {
            guard let index = batches.firstIndex(where: { $0.segment == item.segment }) else { continue }
            batches[index].spooledBytes = item.end
            if item.sealed {
                batches[index].isSpoolSealed = true
                releaseLines(index)
            }
        }
        for failure in progress.failures { countSpoolFailure(failure) }
        guard let message = unreportedSpoolFailure else { return nil }
        unreportedSpoolFailure = nil
        spoolFailureReported = true
        return message
    }

    /// Counts a failed spool operation; only the first one is kept for the log.
    mutating func countSpoolFailure(_ error: any Error) {
        metrics.spoolWriteErrors += 1
        if !spoolFailureReported && unreportedSpoolFailure == nil { unreportedSpoolFailure = "\(error)" }
    }

    /// Lets batch `index`'s lines go once its body holds them and they are on disk (or there is no
    /// spool); their buffer is reused.
    private mutating func releaseLines(_ index: Int) {
        let batch = batches[index]
        guard batch.isSealed, batch.body != nil, batch.linesOnlyInBody == nil,
            !hasSpool || (batch.isSpoolSealed && batch.spooledBytes == batch.bytes.count)
        else { return }
        batches[index].linesOnlyInBody = batch.bytes.count
        var lines = batches[index].bytes
        batches[index].bytes = []
        reuse(&lines)
    }

    // MARK: Restoring and shutdown

    /// Batches a previous run left in the spool, ahead of anything recorded; `nextSequence` continues
    /// after the highest sequence found.
    mutating func restored(_ restored: [PendingBatch], sequencesAfter highest: UInt64, linesLeftOut: Int) {
        nextSequence = max(nextSequence, highest + 1)
        batches.insert(contentsOf: restored, at: 0)
        pendingBytes += restored.reduce(0) { $0 + $1.lineBytes }
        metrics.spoolLinesLeftOut += UInt64(linesLeftOut)
        if pendingBytes > limits.maximumPendingBytes { _ = dropOldest() }
    }

    /// Stops intake: later lines are dropped and counted. The open batch is sealed.
    mutating func close() {
        isClosed = true
        sealOpenBatch()
    }

    /// The spool is let go after shutdown: counts what is neither delivered nor on disk as lost.
    mutating func releaseSpool() -> UInt64 {
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

    /// The counters, with what is pending now.
    var currentMetrics: AgentMetrics {
        var metrics = metrics
        metrics.pendingLines = batches.reduce(0) { $0 + $1.lineCount }
        metrics.pendingBytes = pendingBytes
        return metrics
    }

    /// Memory held by the batches' lines and bodies and the spare buffers, spare capacity included.
    var reservedBytes: Int {
        batches.reduce(0) { $0 + $1.bytes.capacity + ($1.body?.capacity ?? 0) }
            + spareBuffers.reduce(0) { $0 + $1.capacity }
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
    static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            _ = buffer.initialize(fromContentsOf: bytes)
            count = bytes.count
        }
    }
}
