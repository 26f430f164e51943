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

/// The pending batches as a plain value: every change is an event (a line recorded, a flush due, a
/// batch sent, answered, merged or split, the spool written), and what an event needs done outside the
/// lock (gzip, spool files, sends) comes back as its result. ``PendingBatches`` holds it behind the
/// lock `record` takes and runs that work after releasing it, so recording never waits for the disk,
/// gzip or the network; the tests drive it alone, with no disk or network.
///
/// Every batch goes to every destination: each destination has its own cursor over the same batches
/// (a bit per batch), its own retry schedule and its own cap, so a destination that is down keeps its
/// backlog within its cap and never delays or drops what another gets. A batch leaves when no
/// destination needs it any more.
///
/// Invariants (checked by the property tests), per destination: every recorded line is pending,
/// written, dropped, rejected or expired, each once; batches go out in the order their lines were
/// recorded; its backlog stays within its cap but for the one batch being filled.
struct BatchingState {
    private(set) var batches: [PendingBatch] = []
    private(set) var nextSequence: UInt64 = 1
    /// Bytes of line protocol held for any destination.
    private(set) var pendingBytes = 0
    /// The agent's own counters; what destinations did is in their cursors.
    var metrics = AgentMetrics()
    var recentInstants: RecentInstants
    private(set) var isClosed = false
    /// Points offered after intake closed (a producer still recording after the agent stopped).
    private(set) var droppedAfterClose: UInt64 = 0
    /// Whether the batches are mirrored in a spool directory.
    private(set) var hasSpool: Bool
    let limits: APIHealthConfiguration.Batching
    private(set) var destinations: [DestinationCursor]
    /// One bit per destination.
    private let allDestinations: UInt64
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
        destinationCaps: [Int]? = nil
    ) {
        self.limits = limits
        self.hasSpool = hasSpool
        recentInstants = RecentInstants(precision: precision)
        bufferCapacity = min(limits.maximumBytes, 16 << 20) + 64 * 1_024
        let caps = Array((destinationCaps ?? [limits.maximumPendingBytes]).prefix(Self.maximumDestinations))
        destinations = (caps.isEmpty ? [limits.maximumPendingBytes] : caps).map {
            DestinationCursor(maximumPendingBytes: $0)
        }
        allDestinations = destinations.count == 64 ? ~0 : (1 << UInt64(destinations.count)) - 1
    }

    // MARK: Recording

    /// What recording a line changed, for the waits to signal.
    struct Appended {
        var accepted = false
        /// A batch was opened or sealed: the shipper's wait may end sooner.
        var wakesShipper = false
        /// A batch was sealed by its size: the spool worker writes it through and makes its body now.
        var sealedFull = false
        /// Batches were dropped at a destination's cap.
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
            countDroppedAfterClose()
            return result
        }
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
            if batches[last].lineCount == 0 {
                batches.removeLast()
                for index in destinations.indices { destinations[index].pendingBatches -= 1 }
            }
            return result
        }
        result.accepted = true
        if !repairs.isEmpty { metrics.pointsRepaired += 1 }
        batches[last].lineCount += 1
        batches[last].lastLineAt = now
        let added = batches[last].bytes.count - before
        pendingBytes += added
        metrics.pointsRecorded += 1
        if batches[last].lineCount >= limits.maximumLines || batches[last].bytes.count >= limits.maximumBytes {
            seal(last)
            result.wakesShipper = true
            result.sealedFull = true
        }
        // Last: dropping shifts the batches' indices.
        for index in destinations.indices {
            destinations[index].pendingBytes += added
            destinations[index].pendingLines += 1
            if destinations[index].pendingBytes > destinations[index].maximumPendingBytes {
                result.dropped = dropOldest(for: index) || result.dropped
            }
        }
        return result
    }

    /// A line appended although intake has closed, in a sealed batch of its own: the agent's last health
    /// point, recorded once everything before it was sent, so that it reports the final counts.
    mutating func appendAfterClose(
        now: Duration,
        _ encode: (inout [UInt8], inout RecentInstants) throws(LineProtocolError) -> LineEncoder.Repairs
    ) -> Appended {
        isClosed = false
        var appended = append(now: now, encode)
        close()
        appended.wakesShipper = true
        return appended
    }

    /// Counts points whose values were changed on their way out.
    mutating func countRepaired(_ points: Int) { metrics.pointsRepaired += UInt64(points) }

    /// Counts a sample that could not become a line at all.
    mutating func countInvalid() { metrics.pointsInvalid += 1 }

    /// Counts a request sample the capture filter chose not to record.
    mutating func countFiltered() { metrics.requestsFiltered += 1 }

    /// Counts a point dropped before it became a line (offered after intake closed).
    mutating func countDroppedAfterClose() {
        metrics.pointsDropped += 1
        droppedAfterClose += 1
    }

    /// Drops the oldest batches `destination` still needs while its backlog is over its cap, keeping its
    /// newest; a batch no destination needs any more leaves (its spool file goes to the spool worker).
    /// The retry schedule is the destination's, so it stays.
    private mutating func dropOldest(for destination: Int) -> Bool {
        let bit: UInt64 = 1 << UInt64(destination)
        var dropped = false
        var index = 0
        while destinations[destination].pendingBytes > destinations[destination].maximumPendingBytes
            && destinations[destination].pendingBatches > 1 && index < batches.count
        {
            guard batches[index].awaiting & bit != 0 else {
                index += 1
                continue
            }
            let batch = batches[index]
            release(index, from: destination)
            destinations[destination].counters.pointsDropped += UInt64(batch.lineCount)
            dropped = true
            if batches.indices.contains(index), batches[index].segment == batch.segment { index += 1 }
        }
        return dropped
    }

    /// Clears `destination`'s bit on batch `index` and takes it off the destination's backlog; the batch
    /// leaves when no destination needs it, its file going to the spool worker. Returns whether it left.
    @discardableResult
    private mutating func release(_ index: Int, from destination: Int) -> Bool {
        let bit: UInt64 = 1 << UInt64(destination)
        guard batches[index].awaiting & bit != 0 else { return false }
        batches[index].awaiting &= ~bit
        destinations[destination].pendingBytes -= batches[index].lineBytes
        destinations[destination].pendingLines -= batches[index].lineCount
        destinations[destination].pendingBatches -= 1
        if destinations[destination].inFlight == batches[index].segment { destinations[destination].inFlight = nil }
        guard batches[index].awaiting == 0 else { return false }
        var batch = batches.remove(at: index)
        pendingBytes -= batch.lineBytes
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
    mutating func sealDue(now: Duration, jitter: Duration = .zero) -> Duration? {
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

    /// The index of the oldest batch `destination` still needs.
    private func head(of destination: Int) -> Int? {
        let bit: UInt64 = 1 << UInt64(destination)
        return batches.firstIndex { $0.awaiting & bit != 0 }
    }

    /// The oldest sealed batch `destination` needs if it may be sent at `now`, a join to make first,
    /// or how long to wait.
    mutating func nextSend(now: Duration, openDeadline: Duration?, destination: Int = 0) -> HeadStep {
        guard let index = head(of: destination), batches[index].isSealed else {
            return .next(.wait(until: openDeadline))
        }
        if let notBefore = destinations[destination].retryNotBefore, notBefore > now {
            return .next(.wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore))
        }
        if let plan = mergePlan(at: index) { return .merge(plan) }
        let head = batches[index]
        destinations[destination].inFlight = head.segment
        return .next(
            .send(segment: head.segment, body: head.body, lineCount: head.lineCount, lineBytes: head.lineBytes)
        )
    }

    /// Whether one of `segments` is being sent to a destination.
    private func isInFlight(_ segments: ArraySlice<PendingBatch>) -> Bool {
        destinations.contains { cursor in
            cursor.inFlight.map { flying in segments.contains { $0.segment == flying } } ?? false
        }
    }

    /// The sealed batches after batch `start` that fit into it within the batch limits, needed by the
    /// same destinations and being sent to none, so a backlog (many small batches cut while the server
    /// was away) goes out in few requests.
    private mutating func mergePlan(at start: Int) -> MergePlan? {
        let awaiting = batches[start].awaiting
        func mergeable(_ batch: PendingBatch) -> Bool {
            batch.isSealed && batch.mayMerge && batch.awaiting == awaiting && (!hasSpool || batch.isSpoolSealed)
        }
        guard mergeable(batches[start]) else { return nil }
        var end = start + 1
        var lines = batches[start].lineCount
        var size = batches[start].lineBytes
        while end < batches.count, mergeable(batches[end]),
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
    mutating func merged(_ plan: MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?) {
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
            if let start { batches[start].mayMerge = false }
            return
        }
        let range = start..<(start + plan.sources.count)
        var merged = batches[start]
        merged.segment = plan.segment
        merged.bytes = lines
        merged.body = nil
        merged.linesOnlyInBody = nil
        merged.lineCount = plan.lineCount
        merged.spooledBytes = lines.count
        merged.isSpoolSealed = true
        merged.lastLineAt = batches[range.upperBound - 1].lastLineAt
        merged.failingSince = batches[range].compactMap(\.failingSince).min()
        for index in destinations.indices where merged.awaiting & (1 << UInt64(index)) != 0 {
            destinations[index].pendingBatches -= plan.sources.count - 1
        }
        batches.replaceSubrange(range, with: [merged])
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

    /// `destination` stored batch `segment`.
    mutating func delivered(_ segment: String, sentBytes: Int, compressedBytes: Int, destination: Int = 0) {
        destinations[destination].counters.batchesWritten += 1
        destinations[destination].counters.bytesBeforeGzip += UInt64(sentBytes)
        destinations[destination].counters.bytesAfterGzip += UInt64(compressedBytes)
        destinations[destination].counters.lastError = nil
        destinations[destination].retryNotBefore = nil
        destinations[destination].failedAttempts = 0
        destinations[destination].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }),
            batches[index].awaiting & (1 << UInt64(destination)) != 0
        else { return }
        destinations[destination].counters.pointsWritten += UInt64(batches[index].lineCount)
        batches[index].failingSince = nil
        release(index, from: destination)
    }

    /// What refusing a batch leaves to do outside the lock.
    struct Refusal {
        /// The batch's lines, for `rejected/`.
        var contents: BatchContents
        /// No destination needs the batch any more: its spool file goes with the copy.
        var removesFile: Bool
    }

    /// `destination` refused batch `segment` for good (or it failed past the retry limit): the batch
    /// leaves its cursor and is counted, `refusedCount` of its lines as refused (the rest were stored:
    /// a partial write) or all of them. Returns its lines for `rejected/`, to be written outside the lock
    /// (`nil` if the batch is gone or there is no spool).
    mutating func refused(
        _ segment: String,
        reason: String,
        expired: Bool,
        count refusedCount: Int?,
        destination: Int = 0
    ) -> Refusal? {
        destinations[destination].counters.lastError = reason
        destinations[destination].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }),
            batches[index].awaiting & (1 << UInt64(destination)) != 0
        else { return nil }
        let batch = batches[index]
        let refused = UInt64(min(refusedCount ?? batch.lineCount, batch.lineCount))
        if expired {
            destinations[destination].counters.pointsExpired += refused
        } else {
            destinations[destination].counters.pointsRejected += refused
        }
        // A partial write (InfluxDB 1.x answers `dropped=N`, InfluxDB 3 lists the lines): the rest are stored.
        destinations[destination].counters.pointsWritten += UInt64(batch.lineCount) - refused
        let left = release(index, from: destination)
        guard hasSpool else { return nil }
        if left, let removal = spoolRemovals.lastIndex(of: segment) {
            // Removed with the copy, which must be written first.
            spoolRemovals.remove(at: removal)
        }
        return Refusal(contents: batch.contents, removesFile: left)
    }

    /// The lines of batch `segment` to split after a 413, and how many there are; `nil` if it is gone.
    func splitSource(_ segment: String) -> (contents: BatchContents, lineCount: Int)? {
        guard let batch = batches.first(where: { $0.segment == segment }) else { return nil }
        return (batch.contents, batch.lineCount)
    }

    /// `destination` found batch `segment` too large: it gets the `halves` (written to the spool as
    /// `names` when `written`) in its place, never joined again, and the batch leaves its cursor (other
    /// destinations still get it whole). If the batch is gone meanwhile, the halves' files are let go.
    mutating func split(
        _ segment: String,
        into halves: SplitHalves,
        names: (first: String, second: String),
        written: Bool,
        failure: SpoolError?,
        destination: Int = 0
    ) {
        if let failure { countSpoolFailure(failure) }
        let bit: UInt64 = 1 << UInt64(destination)
        destinations[destination].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }), batches[index].awaiting & bit != 0
        else {
            if written && !batches.contains(where: { $0.segment == names.first }) {
                spoolRemovals += [names.first, names.second]
            }
            return
        }
        let original = batches[index]
        var originalIndex = index
        if index >= 2, batches[index - 2].segment == names.first, batches[index - 1].segment == names.second {
            // Another destination split it the same way: the halves are shared.
            batches[index - 2].awaiting |= bit
            batches[index - 1].awaiting |= bit
        } else {
            originalIndex += 2
            var first = original
            first.awaiting = bit
            first.mayMerge = false
            first.body = nil
            first.linesOnlyInBody = nil
            first.segment = names.first
            first.bytes = halves.first
            first.lineCount = halves.firstLines
            first.spooledBytes = halves.first.count
            first.isSpoolSealed = written || !hasSpool
            var second = first
            second.segment = names.second
            second.bytes = halves.second
            second.lineCount = halves.secondLines
            second.spooledBytes = halves.second.count
            pendingBytes += halves.first.count + halves.second.count
            batches.insert(contentsOf: [first, second], at: index)
        }
        destinations[destination].pendingBytes += halves.first.count + halves.second.count
        destinations[destination].pendingLines += halves.firstLines + halves.secondLines
        destinations[destination].pendingBatches += 2
        let left = release(originalIndex, from: destination)
        // The whole batch stays on disk when the halves could not be written; they still go from memory.
        if left && hasSpool && !written, let removal = spoolRemovals.lastIndex(of: original.segment) {
            spoolRemovals.remove(at: removal)
        }
    }

    /// A send of batch `segment` to `destination` failed: the destination waits until `notBefore`.
    /// Returns `false` when the batch has been failing for longer than `retryLimit` (the caller then
    /// refuses it as expired).
    mutating func failed(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?,
        destination: Int = 0
    ) -> Bool {
        destinations[destination].counters.retries += 1
        destinations[destination].counters.lastError = error
        destinations[destination].failedAttempts += 1
        destinations[destination].retryNotBefore = notBefore
        destinations[destination].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return true }
        let since = batches[index].failingSince ?? now
        batches[index].failingSince = since
        if let retryLimit, now - since > retryLimit { return false }
        return true
    }

    /// Retry waits end now (shutdown sends what is pending without waiting out backoff).
    mutating func clearRetryWait(destination: Int? = nil) {
        for index in destinations.indices where destination == nil || destination == index {
            destinations[index].retryNotBefore = nil
        }
    }

    /// Sends in a row that failed for `destination`.
    func failedAttempts(destination: Int = 0) -> Int { destinations[destination].failedAttempts }

    /// Whether `destination` has nothing left to send.
    func isDrained(destination: Int) -> Bool { destinations[destination].pendingBatches == 0 }

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

    /// Batches a previous run left in the spool, ahead of anything recorded, for every destination;
    /// `nextSequence` continues after the highest sequence found.
    mutating func restored(_ restored: [PendingBatch], sequencesAfter highest: UInt64, linesLeftOut: Int) {
        nextSequence = max(nextSequence, highest + 1)
        var restored = restored
        for index in restored.indices { restored[index].awaiting = allDestinations }
        batches.insert(contentsOf: restored, at: 0)
        let bytes = restored.reduce(0) { $0 + $1.lineBytes }
        let lines = restored.reduce(0) { $0 + $1.lineCount }
        pendingBytes += bytes
        metrics.spoolLinesLeftOut += UInt64(linesLeftOut)
        for index in destinations.indices {
            destinations[index].pendingBytes += bytes
            destinations[index].pendingLines += lines
            destinations[index].pendingBatches += restored.count
            if destinations[index].pendingBytes > destinations[index].maximumPendingBytes { _ = dropOldest(for: index) }
        }
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
