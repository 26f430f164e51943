import LineProtocol

/// The pending batches in send order, the open one (if any) last: opening, filling and sealing them, the
/// bits of the destinations that still need each and send it, joins and splits, bodies, and the buffers
/// they reuse. Who needs how much is ``DestinationCursors``'; ``BatchingState`` tells both.
struct BatchQueue {
    private(set) var batches: [PendingBatch] = []
    private var nextSequence: UInt64 = 1
    private var buffers: BufferPool

    init(bufferCapacity: Int) { buffers = BufferPool(capacity: bufferCapacity) }

    /// Memory held by the batches' lines and bodies and the spare buffers, spare capacity included.
    var reservedBytes: Int {
        batches.reduce(0) { $0 + $1.bytes.capacity + ($1.body?.capacity ?? 0) } + buffers.reservedBytes
    }

    /// The sequence number of the next batch or join.
    mutating func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    /// The index of batch `segment`, if it is still here.
    func index(of segment: String) -> Int? { batches.firstIndex { $0.segment == segment } }

    /// The index of the oldest batch destination `bit` still needs.
    func head(of bit: UInt64) -> Int? { batches.firstIndex { $0.awaits(bit) } }

    // MARK: Recording

    /// Opens a batch at `now` unless the last one is open. Returns whether it did.
    @inline(__always)
    mutating func openIfNeeded(now: Duration) -> Bool {
        guard batches.isEmpty || batches[batches.count - 1].isSealed else { return false }
        batches.append(PendingBatch(opening: SegmentName.sequence(takeSequence()), bytes: buffers.take(), now: now))
        return true
    }

    /// Copies `line` into the open batch, its series given an instant it has not used (the line rewritten
    /// when that is not its own). Returns the bytes added, `nil` if the series has no free instant near the
    /// point's time (nothing is added); `full` when the batch is full within `limits`.
    @inline(__always)
    mutating func append(
        _ line: EncodedLine,
        series: Int,
        instants: inout RecentInstants,
        limits: APIHealthConfiguration.Batching
    ) -> (added: Int, full: Bool)? {
        batches[batches.count - 1].append(line, series: series, instants: &instants, limits: limits)
    }

    /// Lets the last batch go if no line made it in. Returns whether it did.
    mutating func removeLastIfEmpty() -> Bool {
        guard let last = batches.last, last.lineCount == 0 else { return false }
        batches.removeLast()
        return true
    }

    /// When the open batch's first line was recorded, `nil` without an open batch.
    var openSince: Duration? {
        guard let last = batches.last, case .open(let firstLineAt, _) = last.life else { return nil }
        return firstLineAt
    }

    /// Seals the last batch, if open, for the destinations in `awaiting`.
    mutating func sealLast(for awaiting: UInt64) {
        if let last = batches.indices.last { seal(last, for: awaiting) }
    }

    /// Seals batch `index` for `awaiting` and gives back the room reserved for it to grow when that is more
    /// than an eighth of its bytes (a batch sealed by its size has little left; one sealed early, by the flush
    /// delay, has most of it), so pending memory follows the pending cap.
    mutating func seal(_ index: Int, for awaiting: UInt64) {
        guard !batches[index].isSealed else { return }
        batches[index].seal(for: awaiting)
        var bytes = batches[index].bytes
        if bytes.capacity - bytes.count > bytes.count / 8 {
            batches[index].bytes = []
            batches[index].bytes = BufferPool.exactCopy(bytes[...])
            buffers.give(&bytes)
        }
    }

    // MARK: Destinations

    /// Clears destination `bit` on batch `index`. Returns its lines and bytes, and whether no destination
    /// needs it any more (it has then left, its buffer kept for reuse); `nil` if `bit` did not need it.
    mutating func release(_ index: Int, from bit: UInt64) -> (lines: Int, bytes: Int, left: Bool)? {
        guard var sealed = batches[index].sealed, sealed.awaiting & bit != 0 else { return nil }
        sealed.awaiting &= ~bit
        sealed.sending &= ~bit
        batches[index].sealed = sealed
        let lines = batches[index].lineCount
        let bytes = batches[index].lineBytes
        guard sealed.awaiting == 0 else { return (lines, bytes, false) }
        var batch = batches.remove(at: index)
        buffers.give(&batch.bytes)
        return (lines, bytes, true)
    }

    /// Destination `bit` is sending batch `index`.
    mutating func startSending(_ index: Int, to bit: UInt64) { batches[index].sealed?.sending |= bit }

    /// Destination `bit`'s send of batch `segment` is over: the index of the batch, if it is still here.
    mutating func stopSending(_ segment: String, to bit: UInt64) -> Int? {
        guard let index = index(of: segment) else { return nil }
        batches[index].sealed?.sending &= ~bit
        return index
    }

    /// Whether one of the batches in `range` is being sent to a destination.
    func isInFlight(_ range: Range<Int>) -> Bool { batches[range].contains { ($0.sealed?.sending ?? 0) != 0 } }

    /// Batch `index`'s sends began failing at `now` unless they already were: returns since when.
    mutating func failing(_ index: Int, now: Duration) -> Duration {
        let since = batches[index].sealed?.failingSince ?? now
        batches[index].sealed?.failingSince = since
        return since
    }

    /// Batch `index` was delivered: it is failing no more.
    mutating func succeeded(_ index: Int) { batches[index].sealed?.failingSince = nil }

    // MARK: Joins and splits

    /// The sealed batches after batch `start` that fit into it within `limits`, needed by the same
    /// destinations and being sent to none (and, with a spool, with sealed files), so a backlog (many small
    /// batches cut while the server was away) goes out in few requests.
    mutating func joinPlan(at start: Int, limits: APIHealthConfiguration.Batching, hasSpool: Bool) -> MergePlan? {
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
        guard end - start > 1, !isInFlight(start..<end) else { return nil }
        let sources = batches[start..<end]
        return MergePlan(
            sources: sources.map(\.segment),
            contents: sources.map(\.contents),
            segment: SegmentName.merged(last: sources[sources.endIndex - 1].segment, sequence: takeSequence()),
            lineCount: lines,
            lineBytes: size
        )
    }

    /// Puts the join of `plan` (its `lines`) in place of its sources if they are still here, in a row,
    /// needed by the same destinations and being sent nowhere. Returns who needs the join and by how many
    /// bytes its lines outgrew its sources' (lines moved to true time as they were joined may change length);
    /// `nil` when it was let go (then the first source, if still here, is never joined again).
    mutating func join(_ plan: MergePlan, lines: [UInt8]?) -> (awaiting: UInt64, grown: Int)? {
        guard let start = index(of: plan.sources[0]) else { return nil }
        let end = start + plan.sources.count
        let unchanged =
            batches.count >= end
            && zip(batches[start...], plan.sources).allSatisfy {
                $0.segment == $1 && $0.awaiting == batches[start].awaiting
            } && !isInFlight(start..<end)
        guard unchanged, let lines else {
            batches[start].sealed?.joinable = false
            return nil
        }
        let awaiting = batches[start].awaiting
        var joined = PendingBatch(sealed: plan.segment, bytes: lines, lineCount: plan.lineCount, awaiting: awaiting)
        joined.sealed?.failingSince = batches[start..<end].compactMap { $0.sealed?.failingSince }.min()
        // Its lines are its sources' as they read (moved where they were to be moved).
        joined.stampedInThisRun = batches[start..<end].allSatisfy { $0.stampedInThisRun && $0.shift == nil }
        let grown = lines.count - batches[start..<end].reduce(0) { $0 + $1.lineBytes }
        batches.replaceSubrange(start..<end, with: [joined])
        return (awaiting, grown)
    }

    /// Gives destination `bit` the two halves of batch `index` in its place, before it: each half another
    /// destination made of it and still has there is shared (one may have left already, delivered), the
    /// others are made (`unwritten`: their spool files are still to write). Returns the index the batch
    /// itself is at now.
    mutating func insertHalves(
        of index: Int,
        _ halves: SplitHalves,
        names: (first: String, second: String),
        for bit: UInt64,
        unwritten: Bool
    ) -> Int {
        let hasSecond = index >= 1 && batches[index - 1].segment == names.second
        let firstIndex = hasSecond ? index - 2 : index - 1
        let hasFirst = firstIndex >= 0 && batches[firstIndex].segment == names.first
        if hasFirst { batches[firstIndex].sealed?.awaiting |= bit }
        if hasSecond { batches[index - 1].sealed?.awaiting |= bit }
        let failingSince = batches[index].sealed?.failingSince
        // Cut from its lines as they read (moved where they were to be moved).
        let stampedInThisRun = batches[index].stampedInThisRun && batches[index].shift == nil
        func half(_ segment: String, _ bytes: [UInt8], lines: Int) -> PendingBatch {
            var half = PendingBatch(sealed: segment, bytes: bytes, lineCount: lines, awaiting: bit)
            half.sealed?.joinable = false
            half.sealed?.failingSince = failingSince
            half.stampedInThisRun = stampedInThisRun
            // Unwritten halves are sealed on disk by the next round, which counts the failure.
            if unwritten { half.sealed?.spool = .writing(bytes: bytes.count) }
            return half
        }
        var made: [PendingBatch] = []
        if !hasFirst { made.append(half(names.first, halves.first, lines: halves.firstLines)) }
        if !hasSecond { made.append(half(names.second, halves.second, lines: halves.secondLines)) }
        // A first half made goes before a second half shared; anything made otherwise goes right before the batch.
        batches.insert(contentsOf: made, at: !hasFirst && hasSecond ? index - 1 : index)
        return index + made.count
    }

    // MARK: Bodies and the spool

    /// The newest sealed batch behind the head without a body: the next one to compress.
    func nextWaitingWithoutBody() -> (segment: String, lines: [UInt8], shift: TimestampShift?)? {
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
    mutating func keepBody(_ body: [UInt8], of segment: String, restamped: Bool, hasSpool: Bool) {
        guard let index = index(of: segment), batches[index].isSealed, batches[index].body == nil,
            batches[index].shift == nil || restamped
        else { return }
        batches[index].sealed?.body = body
        releaseLines(index, hasSpool: hasSpool)
    }

    /// The spool worker wrote batch `segment`'s first `end` bytes (and sealed its file when `sealed`).
    mutating func spooled(_ segment: String, to end: Int, sealed: Bool, hasSpool: Bool) {
        guard let index = index(of: segment) else { return }
        batches[index].spooled(to: end, sealed: sealed)
        if sealed { releaseLines(index, hasSpool: hasSpool) }
    }

    /// Lets batch `index`'s lines go once its body holds them and they are on disk (or there is no
    /// spool); their buffer is reused.
    private mutating func releaseLines(_ index: Int, hasSpool: Bool) {
        let batch = batches[index]
        guard batch.body != nil, batch.linesOnlyInBody == nil,
            !hasSpool || (batch.isSpoolSealed && batch.spooledBytes == batch.bytes.count)
        else { return }
        batches[index].sealed?.linesOnlyInBody = batch.bytes.count
        var lines = batches[index].bytes
        batches[index].bytes = []
        buffers.give(&lines)
    }

    /// Batches a previous run left in the spool, ahead of anything recorded, needed by `awaiting`;
    /// sequences continue after `highest`.
    mutating func restore(_ restored: [PendingBatch], awaiting: UInt64, sequencesAfter highest: UInt64) {
        nextSequence = max(nextSequence, highest + 1)
        var restored = restored
        for index in restored.indices {
            restored[index].sealed?.awaiting = awaiting
            restored[index].stampedInThisRun = false
        }
        batches.insert(contentsOf: restored, at: 0)
    }

    /// The device clock's offset (`nanoseconds`, true time minus the device's) is known: every batch of this
    /// run whose lines can still be moved (open, or sealed and neither being sent nor held only as its body)
    /// moves the lines it holds now to true time when its body is made (a body made already is made again).
    /// Returns the lines it will move.
    mutating func shiftPending(by nanoseconds: Int64, precision: Precision) -> UInt64 {
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
        return moved
    }
}
