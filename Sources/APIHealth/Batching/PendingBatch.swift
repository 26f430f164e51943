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
    /// The destinations that still need it, one bit each (see ``BatchingState``).
    var awaiting: UInt64 = 1

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
