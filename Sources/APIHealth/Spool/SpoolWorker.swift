/// The spool worker: every ``SpoolOptions/writeThroughInterval`` (at once for a full batch) it writes
/// what the record loop recorded through to the spool, removes
/// the files of batches that are gone, keeps a newly learned country in the spool directory, and has the
/// batches waiting to be sent compressed. Recording never touches a file; this loop does it all.
///
/// Its rounds keep a clock of their own, the system's in an agent, not the agent's: the interval bounds
/// how long a recorded line stays only in memory, which a crash measures in real time, and a test that
/// drives batching with a manual clock still gets its lines written through. A test of the rounds
/// themselves gives it a manual clock and moves it.
///
/// ```swift
/// let worker = SpoolWorker(pending: pending, recorder: recorder, compressesBatches: true,
///                          lossReporter: reporter, writeThroughInterval: .milliseconds(20),
///                          clock: SystemAgentClock())
/// await worker.run()   // returns once intake has closed, after a last write-through
/// ```
struct SpoolWorker: Sendable {
    let pending: PendingBatches
    let recorder: RequestRecorder
    /// Whether waiting batches are compressed ahead of their send: not without a destination (lines
    /// stay in the spool).
    let compressesBatches: Bool
    let lossReporter: LossReporter
    let writeThroughInterval: Duration
    /// What the rounds' beat is measured on.
    let clock: any AgentClock
    /// Where a learned country is kept for the next launch (``CountryLearner``), when one is learned.
    var countryFile: SpoolDirectory? = nil
    /// The gzip memory the worker's loop makes bodies in, its own.
    private let compression = GzipWorkspace()

    /// Runs rounds until intake has closed, then one last write-through keeps the rest.
    func run() async {
        // The country in the spool directory: one learned later replaces it.
        var keptCountry = countryFile?.learnedCountry()
        while !Task.isCancelled {
            writeThrough(answering: pending.filled.takePosted(), logFailure: lossReporter.spoolWriteFailed)
            keepLearnedCountry(replacing: &keptCountry)
            if compressesBatches { pending.makeWaitingBodies(compressingIn: compression) }
            lossReporter.reportDroppedAtCap(pending)
            // Intake is closed: nothing new can arrive, so one last write-through (below) keeps the rest.
            if pending.isClosed { break }
            await pending.filled.wait(until: clock.now + writeThroughInterval, on: clock)
        }
        recorder.catchUp()
        // No more posts: a caller from now on waits for `run()` to end instead.
        writeThrough(answering: pending.filled.close()) { _ in }
        keepLearnedCountry(replacing: &keptCountry)
    }

    /// One round; then `waiting`, the callers that asked before it began, have what they recorded on disk.
    private func writeThrough(answering waiting: [CheckedContinuation<Bool, Never>], logFailure: (String) -> Void) {
        pending.writeThrough(logFailure: logFailure)
        for waiter in waiting { waiter.resume(returning: true) }
    }

    /// Waits until a round that began after this call is done: what the caller recorded before it is
    /// then on disk. `false` at once when the worker's loop has ended (its last round is done).
    func writtenThrough() async -> Bool {
        await withCheckedContinuation { continuation in
            if !pending.filled.post(continuation) { continuation.resume(returning: false) }
        }
    }

    /// Writes the country the record loop learned, once, when it is not the one `kept`, for the next
    /// launch; a failure leaves the file as it was (the next launch starts from the country kept before).
    private func keepLearnedCountry(replacing kept: inout String?) {
        guard let countryFile, let country = pending.publishedCountry?.country, country != kept else { return }
        kept = country
        countryFile.keepLearnedCountry(country)
    }
}
