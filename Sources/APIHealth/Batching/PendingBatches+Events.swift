/// What the agent's loops ask of the pending batches, each an event given to the executor
/// (``PendingBatches/modifyStateAndRunActions(_:)``).
extension PendingBatches {
    /// Counts a point or request that became no line: `event` is one of the counting events.
    func count(_ event: BatchingEvent) {
        modifyStateAndRunActions(event)
    }

    /// Seals the open batch if its debounce (plus `jitter`) or maximum age has passed. Returns when it
    /// next falls due.
    func sealDue(now: Duration, jitter: Duration) -> Duration? {
        guard case .wait(let due) = modifyStateAndRunActions(.flushDue(now: now, jitter: jitter)) else { return nil }
        return due
    }

    /// Seals the open batch now (`flush()` and shutdown).
    func sealOpenBatch() {
        modifyStateAndRunActions(.flushRequested)
    }

    /// The oldest sealed batch `destination` needs if it may be sent at `now` (joined first with the
    /// batches behind it), or how long to wait.
    func next(now: Duration, openDeadline: Duration?, for destination: DestinationID) -> NextSend {
        while true {
            switch modifyStateAndRunActions(.sendWanted(destination, now: now, openDeadline: openDeadline)) {
            case .send(let segment, let body, let lineCount, let lineBytes):
                return .send(segment: segment, body: body, lineCount: lineCount, lineBytes: lineBytes)
            case .wait(let deadline):
                return .wait(until: deadline)
            default:
                // A join was made (or let go): ask again.
                continue
            }
        }
    }

    /// The gzip body of batch `segment`: the one kept, or one made of its lines (outside the lock) and
    /// kept for the batch's retries. `nil` if the batch is gone or gzip failed.
    func body(of segment: String, compressingIn workspace: GzipWorkspace? = nil) -> [UInt8]? {
        guard
            case .useBody(let body) = modifyStateAndRunActions(.bodyWanted(segment: segment), compressingIn: workspace)
        else { return nil }
        return body
    }

    /// The device clock's offset (true time minus the device's, in nanoseconds) is known for the first time:
    /// the pending lines stamped on the device's clock are moved to true time as their bodies are made.
    func offsetLearned(nanoseconds: Int64) {
        modifyStateAndRunActions(.offsetLearned(nanoseconds: nanoseconds))
    }

    /// Makes the gzip bodies of the sealed batches waiting behind the head, newest first (the shipper
    /// makes the head's as it sends it), so a backlog is held compressed: once a batch's lines are on
    /// disk (or there is no spool), only its body stays in memory and its buffer is reused. Stops at
    /// the first body that cannot be made.
    func makeWaitingBodies(compressingIn workspace: GzipWorkspace? = nil) {
        while case .useBody = modifyStateAndRunActions(.waitingBodyWanted, compressingIn: workspace) {}
    }

    /// `destination` stored the batch. Its spool file is removed by the spool worker once no
    /// destination needs it.
    func acknowledge(_ segment: String, sentBytes: Int, compressedBytes: Int, for destination: DestinationID) {
        modifyStateAndRunActions(
            .delivered(segment: segment, destination, sentBytes: sentBytes, compressedBytes: compressedBytes)
        )
    }

    /// `destination` refused the batch for good: a copy of the refused lines goes to `rejected/` with
    /// `reason` (written outside the lock), and the batch's file goes once no destination needs it.
    func reject(_ segment: String, reason: String, refused: RefusedLines, for destination: DestinationID) {
        modifyStateAndRunActions(.refused(segment: segment, destination, reason: reason, refused: refused))
    }

    /// Schedules the destination's next send at `notBefore`; a batch failing for longer than
    /// `retryLimit` is set aside as expired (copied to `rejected/`).
    func scheduleRetry(
        _ segment: String,
        notBefore: Duration,
        now: Duration,
        error: String,
        retryLimit: Duration?,
        for destination: DestinationID
    ) {
        modifyStateAndRunActions(
            .sendFailed(
                segment: segment,
                destination,
                notBefore: notBefore,
                now: now,
                error: error,
                retryLimit: retryLimit
            )
        )
    }

    /// Retry waits end now (shutdown sends what is pending without waiting out backoff).
    func clearRetryWaits() {
        modifyStateAndRunActions(.retryWaitsCleared)
    }

    /// Stops intake: later points are dropped and counted. The open batch is sealed.
    func close() {
        modifyStateAndRunActions(.intakeClosed)
    }
}
