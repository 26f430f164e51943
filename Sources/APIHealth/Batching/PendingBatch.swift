import LineProtocol

/// One batch of encoded lines, from the line that opens it to the answer of its last destination.
struct PendingBatch {
    /// Where the batch is in its life. Per destination, the rest of it is in ``awaiting`` and the
    /// destination's cursor: a batch is waiting for a destination while its bit is set, being sent while
    /// it is the destination's `inFlight`, and delivered, refused or dropped for it once the bit is cleared
    /// (and counted in the destination's counters). It leaves when no destination needs it.
    enum Stage {
        /// Still filling: lines are appended to ``PendingBatch/bytes``.
        case open
        /// Ready to send: no line is added any more.
        case sealed
        /// Its gzip request body is made and kept for every send and retry. `linesOnlyInBody` is the size
        /// of its lines once they were let go (they are on disk, or there is no spool): then only the body
        /// holds them.
        case compressed(body: [UInt8], linesOnlyInBody: Int?)
    }

    /// How much of the batch its spool file holds.
    enum SpoolCopy {
        /// The first `bytes` of its lines are written through; the file takes more.
        case writing(bytes: Int)
        /// The first `bytes` of its lines are written, and the file is sealed.
        case sealed(bytes: Int)
    }

    /// Sorts in send order; also the spool file's stem (see ``SegmentName``).
    var segment: String
    /// The lines; empty once they are only in the body (see ``lineBytes``).
    var bytes: [UInt8]
    var lineCount: Int
    var stage = Stage.open
    var spoolCopy = SpoolCopy.writing(bytes: 0)
    var firstLineAt: Duration
    var lastLineAt: Duration
    /// When its sends began to fail (for the retry limit).
    var failingSince: Duration?
    /// Whether the batches behind it may be joined into it before it is sent: not for a half of a batch
    /// the server found too large, nor after a join failed.
    var mayJoin = true
    /// The destinations that still need it, one bit each (see ``BatchingState``).
    var awaiting: UInt64 = 1

    /// Whether lines may no longer be added.
    var isSealed: Bool {
        if case .open = stage { return false }
        return true
    }

    /// The gzip request body, once made.
    var body: [UInt8]? {
        if case .compressed(let body, _) = stage { return body }
        return nil
    }

    /// The size of the lines when only the body holds them.
    var linesOnlyInBody: Int? {
        if case .compressed(_, let size) = stage { return size }
        return nil
    }

    /// Bytes of its lines written through to the spool file.
    var spooledBytes: Int {
        switch spoolCopy {
        case .writing(let bytes), .sealed(let bytes): return bytes
        }
    }

    /// Whether its spool file is sealed.
    var isSpoolSealed: Bool {
        if case .sealed = spoolCopy { return true }
        return false
    }

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
