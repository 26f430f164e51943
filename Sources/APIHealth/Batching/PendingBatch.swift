import LineProtocol

/// One batch of encoded lines, from the line that opens it to the answer of its last destination.
struct PendingBatch {
    /// Where the batch is in its life, with what that stage needs. A batch is open while lines are
    /// added, then sealed until no destination needs it (it then leaves the batches).
    enum Life {
        /// Still filling: lines are appended to ``PendingBatch/bytes``, the first `spooled` of them
        /// written through to its spool file. It is sealed `maximumAge` after `firstLineAt`, or
        /// `flushDelay` after the last line recorded (`BatchingState`'s, written for every line without
        /// touching the batch's life). Every destination needs it.
        case open(firstLineAt: Duration, spooled: Int)
        /// No line is added any more: it waits for its destinations, is sent, compressed and written.
        case sealed(Sealed)
    }

    /// A sealed batch: who still needs it and who is sending it, its spool file, its body, its retries.
    struct Sealed {
        /// The destinations that still need it, one bit each: delivered, refused or dropped for one
        /// once its bit is cleared (and counted in the destination's counters).
        var awaiting: UInt64
        /// The destinations sending it now, one bit each: joins leave it alone.
        var sending: UInt64 = 0
        /// How much of its lines its spool file holds.
        var spool: SpoolCopy
        /// Its gzip request body, once made: kept for every send and retry.
        var body: [UInt8]? = nil
        /// The size of its lines once they were let go (they are on disk, or there is no spool): then
        /// only the body holds them.
        var linesOnlyInBody: Int? = nil
        /// When its sends began to fail (for the retry limit).
        var failingSince: Duration? = nil
        /// Whether the batches behind it may be joined into it before it is sent: not for a half of a
        /// batch the server found too large, nor after a join failed.
        var joinable = true
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
    var life: Life
    /// Lines stamped on the device's own clock, to move to true time when its body is made: set for the
    /// lines it held when the clock's offset was learned (``BatchingEvent/offsetLearned(nanoseconds:)``).
    var shift: TimestampShift?
    /// Whether its lines were stamped in this run, so that the offset learned in it may move them: not those of
    /// a batch a previous run left in the spool (stamped on that run's clock, corrected or not).
    var stampedInThisRun = true

    /// A batch opened at `now` by its first line, for every destination.
    init(opening segment: String, bytes: [UInt8], now: Duration) {
        self.segment = segment
        self.bytes = bytes
        self.lineCount = 0
        self.life = .open(firstLineAt: now, spooled: 0)
    }

    /// A sealed batch whose spool file holds all its lines (one a previous run left).
    init(sealed segment: String, bytes: [UInt8], lineCount: Int, awaiting: UInt64) {
        self.segment = segment
        self.bytes = bytes
        self.lineCount = lineCount
        self.life = .sealed(Sealed(awaiting: awaiting, spool: .sealed(bytes: bytes.count)))
    }

    /// Whether lines may no longer be added.
    var isSealed: Bool {
        if case .open = life { return false }
        return true
    }

    /// The sealed batch's stage, `nil` while it is open.
    var sealed: Sealed? {
        get {
            if case .sealed(let sealed) = life { return sealed }
            return nil
        }
        set {
            if let newValue { life = .sealed(newValue) }
        }
    }

    /// The destinations that still need it, one bit each (every one while it is open).
    var awaiting: UInt64 { sealed?.awaiting ?? ~0 }

    /// Whether destination `bit` still needs it.
    func awaits(_ bit: UInt64) -> Bool { awaiting & bit != 0 }

    /// The gzip request body, once made.
    var body: [UInt8]? { sealed?.body }

    /// The size of the lines when only the body holds them.
    var linesOnlyInBody: Int? { sealed?.linesOnlyInBody }

    /// Bytes of its lines written through to the spool file.
    var spooledBytes: Int {
        switch life {
        case .open(_, let spooled): spooled
        case .sealed(let sealed):
            switch sealed.spool {
            case .writing(let bytes), .sealed(let bytes): bytes
            }
        }
    }

    /// Whether its spool file is sealed.
    var isSpoolSealed: Bool {
        if case .sealed(bytes: _)? = sealed?.spool { return true }
        return false
    }

    /// Bytes of line protocol in the batch.
    var lineBytes: Int { linesOnlyInBody ?? bytes.count }

    /// What the lines are held as, for work done outside the lock.
    var contents: BatchContents {
        linesOnlyInBody == nil ? BatchContents(bytes: bytes, shift: shift) : BatchContents(bytes: bytes, body: body)
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
        let before = bytes.count
        // In place: the batch's array is uniquely referenced, so the copy goes straight into it.
        if let timestamp = line.timestamp {
            bytes.appendCopy(of: line.bytes)
            let instant = instants.claim(series: series, timestamp: timestamp)
            if instant != timestamp {
                bytes.removeLast(bytes.count - before)
                guard let instant else { return nil }
                line.rewritingTimestamp(instant, into: &bytes)
            }
        } else {
            bytes.appendCopy(of: line.bytes)
        }
        lineCount += 1
        let full = lineCount >= limits.maximumLines || bytes.count >= limits.maximumBytes
        return (bytes.count - before, full)
    }

    /// Seals the open batch for every destination in `awaiting`.
    mutating func seal(for awaiting: UInt64) {
        guard case .open(_, let spooled) = life else { return }
        life = .sealed(Sealed(awaiting: awaiting, spool: .writing(bytes: spooled)))
    }

    /// The spool worker wrote its first `end` bytes (and sealed the file when `sealed`).
    mutating func spooled(to end: Int, sealed fileSealed: Bool) {
        switch life {
        case .open(let first, _):
            life = .open(firstLineAt: first, spooled: end)
        case .sealed(var sealed):
            sealed.spool = fileSealed ? .sealed(bytes: end) : .writing(bytes: end)
            life = .sealed(sealed)
        }
    }
}

/// A batch's lines as taken out of the state: the bytes themselves, or the gzip body that alone holds them.
struct BatchContents {
    var bytes: [UInt8]
    /// Set when only the body holds the lines.
    var body: [UInt8]?
    /// How to move the bytes' lines stamped on the device's clock to true time (a body holds them moved).
    var shift: TimestampShift?

    init(bytes: [UInt8], body: [UInt8]? = nil, shift: TimestampShift? = nil) {
        self.bytes = bytes
        self.body = body
        self.shift = shift
    }

    /// The lines, in true time where they were stamped on the device's clock; unpacked from the body when
    /// only it holds them; `nil` if that fails.
    func lines() -> [UInt8]? {
        guard let body else { return shift?.apply(to: bytes) ?? bytes }
        return try? Gzip.decompress(body)
    }
}
