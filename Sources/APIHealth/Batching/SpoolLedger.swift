import LineProtocol

/// What the spool worker owes the spool directory: the files to remove, the bytes of each batch still to
/// write through, and the first failure to report. Empty when the batches have no spool.
struct SpoolLedger {
    /// Whether the batches are mirrored in a spool directory.
    private(set) var isActive: Bool
    /// Spool files to remove, for the spool worker (never a recording thread).
    private var removals: [String] = []
    /// The first spool failure not yet reported to the agent's logger.
    private var unreported: String?
    private var reported = false
    /// Failed spool operations.
    private(set) var failures: UInt64 = 0
    /// A round's work is out, not yet reported back: no second round is handed out meanwhile, so no
    /// bytes are appended twice.
    private var roundIsOut = false

    init(isActive: Bool) { self.isActive = isActive }

    /// Batch files that go: their batches left (or were never kept).
    mutating func remove(_ segments: [String]) {
        if isActive { removals += segments }
    }

    /// Batch file `segment` is not removed after all (the last removal asked for it): the work that
    /// copies it first removes it.
    mutating func keep(_ segment: String) {
        if let index = removals.lastIndex(of: segment) { removals.remove(at: index) }
    }

    /// Counts a failed spool operation; only the first one is kept for the log.
    mutating func count(_ error: any Error) {
        failures += 1
        if !reported && unreported == nil { unreported = "\(error)" }
    }

    /// The first spool failure, once, for the log.
    mutating func takeReport() -> String? {
        guard let message = unreported else { return nil }
        unreported = nil
        reported = true
        return message
    }

    /// What the spool worker writes this round: of `batches`, the bytes recorded since the last round and
    /// the seals of sealed batches, and the files to remove. Nothing while another round is out: its
    /// report (``roundFinished()``) comes first, and the next round writes the rest.
    mutating func startRound(for batches: [PendingBatch]) -> SpoolWork {
        var work = SpoolWork()
        guard isActive && !roundIsOut else { return work }
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
        swap(&work.removals, &removals)
        roundIsOut = !work.isEmpty
        return work
    }

    /// The round handed out has reported back.
    mutating func roundFinished() { roundIsOut = false }

    /// The spool is let go after shutdown. Returns the lines of `batches` neither delivered nor on disk.
    mutating func release(_ batches: [PendingBatch]) -> UInt64 {
        var lost: UInt64 = 0
        for batch in batches {
            if !isActive || batch.spooledBytes == 0 {
                lost += UInt64(batch.lineCount)
            } else if batch.spooledBytes < batch.bytes.count {
                batch.bytes[batch.spooledBytes...].withUnsafeBufferPointer { buffer in
                    for line in LineSplitter(buffer) where !line.range.isEmpty { lost += 1 }
                }
            }
        }
        isActive = false
        removals = []
        return lost
    }
}
