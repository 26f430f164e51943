/// One of the destinations an agent ships to, by its place in ``APIHealthConfiguration/destinations``
/// (the first also stands for "no destination": lines are only sealed and kept).
struct DestinationID: Hashable, Sendable, CustomStringConvertible {
    let index: Int

    /// Its bit in a batch's `awaiting` mask.
    var bit: UInt64 { 1 << UInt64(index) }

    var description: String { "destination \(index)" }
}

/// Everything that happens to the pending batches, as ``BatchingState/handle(_:)`` takes it. A line
/// recorded is the one event with an entry point of its own (``BatchingState/record(_:series:now:afterClose:)``):
/// it carries the line's bytes, lent from the stack of the thread that encoded it, which an enum could
/// only hold as a copy, allocated for every line.
enum BatchingEvent {
    // MARK: Counting
    /// Points whose values were changed on their way out.
    case pointsRepaired(Int)
    /// A sample that could not become a line at all.
    case pointInvalid
    /// A point or sample whose line could not be written (counted as dropped once intake has closed,
    /// as its line would have been).
    case lineInvalid
    /// One more of a counter nothing else changes (a request the capture filter chose not to record, a
    /// cache key evicted, a request the hook let through unrecorded, a metrics handler overflowed).
    case counted(WritableKeyPath<AgentMetrics, UInt64>)
    /// A point offered after intake closed.
    case pointDroppedAfterClose
    /// Paths the endpoint learner sent to the overflow path past its cap.
    case pathsOverflowed(UInt64)
    /// What the endpoint aggregates counted so far, as the record loop publishes it after each round.
    case aggregates(RequestAggregator.Counts)

    // MARK: Sealing
    /// A shipper looks at the open batch at `now`: it is sealed if its debounce (plus `jitter`) or
    /// maximum age has passed.
    case flushDue(now: Duration, jitter: Duration)
    /// `flush()`: the open batch is sealed now.
    case flushRequested
    /// Shutdown: intake closes (later lines are dropped and counted) and the open batch is sealed.
    case intakeClosed

    // MARK: Sending
    /// A destination's shipper asks what to send next at `now`; `openDeadline` is when the open batch
    /// falls due.
    case sendWanted(DestinationID, now: Duration, openDeadline: Duration?)
    /// The join a ``BatchingAction/Work/join(_:)`` asked for is made (`lines`, written to the spool as
    /// a sealed file when `written`), or could not be (`lines` is `nil`).
    case joined(MergePlan, lines: [UInt8]?, written: Bool, failure: SpoolError?)
    /// A shipper needs the body of batch `segment`.
    case bodyWanted(segment: String)
    /// The compressor asks for the next batch waiting behind the head without a body.
    case waitingBodyWanted
    /// The body of batch `segment` is made; `linesClamped` lines had values changed on the way (unsigned
    /// values too large for an integer, for a v1 destination); `restamped` when its lines were moved by the
    /// batch's ``TimestampShift``.
    case bodyMade(segment: String, body: [UInt8], linesClamped: Int, restamped: Bool = false)
    /// The device's clock's offset (true time minus the device's) is known for the first time: the lines
    /// still pending that were stamped on the device's clock are moved to true time when their bodies are made.
    case offsetLearned(nanoseconds: Int64)
    /// The destination stored batch `segment`.
    case delivered(segment: String, DestinationID, sentBytes: Int, compressedBytes: Int)
    /// The destination refused batch `segment` for good: the lines `refused` names.
    case refused(segment: String, DestinationID, reason: String, refused: RefusedLines)
    /// A destination found batch `segment` too large: its lines are wanted to split.
    case splitWanted(segment: String)
    /// The halves of batch `segment` are made (written to the spool as `names` when `written`).
    case split(
        segment: String,
        DestinationID,
        halves: SplitHalves,
        names: (first: String, second: String),
        written: Bool,
        failure: SpoolError?
    )
    /// A send of batch `segment` failed: the destination waits until `notBefore`. A batch failing for
    /// longer than `retryLimit` is set aside as expired.
    case sendFailed(
        segment: String,
        DestinationID,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?
    )
    /// Shutdown: retry waits end, so what is pending goes out without waiting out backoff.
    case retryWaitsCleared

    // MARK: Spool
    /// The spool worker begins a round.
    case spoolRoundStarted
    /// The spool worker's round is done.
    case spoolRoundFinished(SpoolProgress)
    /// A spool operation failed outside a round (a join, a split, a copy to `rejected/`).
    case spoolFailed(SpoolError)
    /// Batches a previous run left in the spool, cut again, go ahead of anything recorded.
    case restored(SpoolRestore.Result)
    /// The spool is let go after shutdown.
    case spoolReleased
}

/// Which lines of a batch a destination refused.
enum RefusedLines {
    /// Every line.
    case all
    /// This many (a partial write: the rest were stored; which ones is not known).
    case count(Int)
    /// These, by their number from 1, with the server's reason for each (the rest were stored).
    case numbered([Int: String])
    /// Every line, because the batch kept failing past the retry limit.
    case expired

    /// How many of a batch's `total` lines were refused (never more than `total`).
    func count(of total: Int) -> Int {
        switch self {
        case .all, .expired: total
        case .count(let count): min(count, total)
        case .numbered(let numbered): min(numbered.count, total)
        }
    }

    /// The refused lines by number, when the server named them.
    var numbered: [Int: String]? {
        if case .numbered(let numbered) = self { return numbered }
        return nil
    }

    /// Whether they were given up on, not refused.
    var isExpired: Bool {
        if case .expired = self { return true }
        return false
    }
}

/// What an event asks to be done outside the lock: at most one piece of work, and the loops to wake.
struct BatchingAction {
    /// The work, done by ``PendingBatches`` after it releases the lock.
    enum Work {
        case none
        /// Send batch `segment` to the destination: its body if made already.
        case send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int)
        /// Nothing to do before `deadline` (`nil`: until something happens).
        case wait(until: Duration?)
        /// Join the batches of the plan (their lines, written to the spool as a sealed file), then
        /// report ``BatchingEvent/joined(_:lines:written:failure:)``.
        case join(MergePlan)
        /// The body is kept already.
        case useBody([UInt8])
        /// Make the body of batch `segment` from `lines` (moved by `shift` first, when the batch holds lines
        /// stamped on the device's clock: ``TimestampShift``), then report
        /// ``BatchingEvent/bodyMade(segment:body:linesClamped:restamped:)``.
        case makeBody(segment: String, lines: [UInt8], shift: TimestampShift? = nil)
        /// Copy the refused lines of batch `segment` to `rejected/` with `reason`, then remove the batch's
        /// own file if `removesFile`; `only` names the lines refused of a partial write.
        case writeRejected(
            segment: String,
            contents: BatchContents,
            reason: String,
            removesFile: Bool,
            only: [Int: String]?
        )
        /// Cut batch `segment` (`lineCount` lines) in halves and write them to the spool, then report
        /// ``BatchingEvent/split(segment:_:halves:names:written:failure:)``; nothing if it is one line.
        case split(segment: String, contents: BatchContents, lineCount: Int)
        /// Write, seal and remove spool files, then report ``BatchingEvent/spoolRoundFinished(_:)``.
        case writeSpool(SpoolWork)
        /// Say, once, that the spool failed.
        case reportSpoolFailure(String)
        /// This many pending points are neither delivered nor on disk: lost when the process exits.
        case lost(UInt64)
    }

    /// The loops an event gives work to.
    struct Wakeups: OptionSet {
        let rawValue: UInt8
        /// A batch was opened or sealed, or retry waits ended: the shippers' waits may end sooner.
        static let shippers = Wakeups(rawValue: 1)
        /// The spool worker has work now: a batch sealed by its size, files to remove.
        static let spoolWorker = Wakeups(rawValue: 2)
        /// Batches left (delivered, refused, dropped), for those waiting for none to be left.
        static let batchesLeft = Wakeups(rawValue: 4)
    }

    var work = Work.none
    var wakeups: Wakeups = []

    init(_ work: Work = .none, wakeups: Wakeups = []) {
        self.work = work
        self.wakeups = wakeups
    }
}

/// What recording one line did: the one event with its own entry point
/// (``BatchingState/record(_:series:now:afterClose:)``) returns this instead of a ``BatchingAction``, a
/// trivial value the record path copies and drops without a switch over the work's payloads.
struct LineRecorded {
    /// The line was taken (`true`), or refused or dropped (counted).
    var accepted = false
    /// The loops the line gave work to.
    var wakeups: BatchingAction.Wakeups = []
}
