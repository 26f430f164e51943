import LineProtocol

extension BatchingState {
    /// The index of the oldest batch `destination` still needs.
    private func head(of destination: DestinationID) -> Int? {
        batches.firstIndex { $0.awaiting & destination.bit != 0 }
    }

    /// The oldest sealed batch `destination` needs if it may be sent at `now`, a join to make first,
    /// or how long to wait.
    mutating func nextSend(for destination: DestinationID, now: Duration, openDeadline: Duration?) -> BatchingAction {
        guard let index = head(of: destination), batches[index].isSealed else {
            return BatchingAction(.wait(until: openDeadline))
        }
        if let notBefore = destinations[destination.index].retryNotBefore, notBefore > now {
            return BatchingAction(.wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore))
        }
        if let plan = joinPlan(at: index) { return BatchingAction(.join(plan)) }
        let head = batches[index]
        destinations[destination.index].inFlight = head.segment
        return BatchingAction(
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
    private mutating func joinPlan(at start: Int) -> MergePlan? {
        let awaiting = batches[start].awaiting
        func joinable(_ batch: PendingBatch) -> Bool {
            batch.isSealed && batch.mayJoin && batch.awaiting == awaiting && (!hasSpool || batch.isSpoolSealed)
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
    mutating func joined(_ plan: MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?) {
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
            if let start { batches[start].mayJoin = false }
            return
        }
        let range = start..<(start + plan.sources.count)
        var joined = batches[start]
        joined.segment = plan.segment
        joined.bytes = lines
        joined.stage = .sealed
        joined.lineCount = plan.lineCount
        joined.spoolCopy = .sealed(bytes: lines.count)
        joined.lastLineAt = batches[range.upperBound - 1].lastLineAt
        joined.failingSince = batches[range].compactMap(\.failingSince).min()
        for index in destinations.indices where joined.awaiting & (1 << UInt64(index)) != 0 {
            destinations[index].pendingBatches -= plan.sources.count - 1
        }
        batches.replaceSubrange(range, with: [joined])
        if hasSpool { spoolRemovals += plan.sources }
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
        guard let index = batches.firstIndex(where: { $0.segment == segment }), batches[index].isSealed,
            batches[index].body == nil
        else { return }
        batches[index].stage = .compressed(body: body, linesOnlyInBody: nil)
        releaseLines(index)
    }

    /// `destination` stored batch `segment`.
    mutating func delivered(_ segment: String, to destination: DestinationID, sentBytes: Int, compressedBytes: Int) {
        let cursor = destination.index
        destinations[cursor].counters.batchesWritten += 1
        destinations[cursor].counters.bytesBeforeGzip += UInt64(sentBytes)
        destinations[cursor].counters.bytesAfterGzip += UInt64(compressedBytes)
        destinations[cursor].counters.lastError = nil
        destinations[cursor].retryNotBefore = nil
        destinations[cursor].failedAttempts = 0
        destinations[cursor].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }),
            batches[index].awaiting & destination.bit != 0
        else { return }
        destinations[cursor].counters.pointsWritten += UInt64(batches[index].lineCount)
        batches[index].failingSince = nil
        release(index, from: destination)
    }

    /// `destination` refused batch `segment` for good (or it failed past the retry limit; for a partial
    /// write, `reason` lists the refused lines): the batch
    /// leaves its cursor and is counted, the refused lines as refused (the rest were stored: a partial
    /// write). Asks for its lines to be copied to `rejected/` outside the lock (not when the batch is
    /// gone or there is no spool).
    mutating func refused(
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
        destinations[cursor].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }),
            batches[index].awaiting & destination.bit != 0
        else { return BatchingAction(wakeups: .batchesLeft) }
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
    mutating func split(
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
        destinations[cursor].inFlight = nil
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
            first.mayJoin = false
            first.stage = .sealed
            first.segment = names.first
            first.bytes = halves.first
            first.lineCount = halves.firstLines
            // Unwritten halves are sealed on disk by the next round, which counts the failure.
            first.spoolCopy =
                written || !hasSpool ? .sealed(bytes: halves.first.count) : .writing(bytes: halves.first.count)
            var second = first
            second.segment = names.second
            second.bytes = halves.second
            second.lineCount = halves.secondLines
            second.spoolCopy =
                written || !hasSpool ? .sealed(bytes: halves.second.count) : .writing(bytes: halves.second.count)
            pendingBytes += halves.first.count + halves.second.count
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
    mutating func failed(
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
        destinations[cursor].inFlight = nil
        guard let index = batches.firstIndex(where: { $0.segment == segment }) else { return true }
        let since = batches[index].failingSince ?? now
        batches[index].failingSince = since
        if let retryLimit, now - since > retryLimit { return false }
        return true
    }
}
