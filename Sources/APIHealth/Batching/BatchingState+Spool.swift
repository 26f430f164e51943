import LineProtocol

extension BatchingState {
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
            if item.sealed {
                batches[index].spoolCopy = .sealed(bytes: item.end)
                releaseLines(index)
            } else {
                batches[index].spoolCopy = .writing(bytes: item.end)
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
    mutating func releaseLines(_ index: Int) {
        let batch = batches[index]
        guard case .compressed(let body, nil) = batch.stage,
            !hasSpool || (batch.isSpoolSealed && batch.spooledBytes == batch.bytes.count)
        else { return }
        batches[index].stage = .compressed(body: body, linesOnlyInBody: batch.bytes.count)
        var lines = batches[index].bytes
        batches[index].bytes = []
        reuse(&lines)
    }

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
            if destinations[index].pendingBytes > destinations[index].maximumPendingBytes {
                _ = dropOldest(for: DestinationID(index: index))
            }
        }
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

    // MARK: Buffers

    /// Keeps `buffer`, emptied, for a later batch if it has room for a whole one and fewer than
    /// ``spareBufferLimit`` are kept.
    mutating func reuse(_ buffer: inout [UInt8]) {
        guard buffer.capacity >= bufferCapacity, spareBuffers.count < Self.spareBufferLimit else { return }
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

    /// A new array holding exactly `bytes`, without spare capacity.
    static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            _ = buffer.initialize(fromContentsOf: bytes)
            count = bytes.count
        }
    }
}
