import Foundation

/// The record loop: the one thread that records captured requests. It takes them from the
/// ``RecordIntake`` in rounds and records each through the ``RequestRecorder`` (filter, series, aggregate,
/// line), in the order they came; nothing else runs the record stage on a captured request, so a
/// recording thread only ever queues.
///
/// A thread of its own rather than a task: readers that must see every request (`metrics`, `flush()`)
/// are synchronous and wait for it, which on the cooperative pool could wait for a thread the waiters
/// themselves hold. It starts at the first request queued and returns once intake has closed and
/// nothing waits, or once its recorder is gone.
///
/// ```swift
/// let intake = RecordIntake { intake in RecordLoop.start(intake: intake, recorder: recorder) }
/// ```
enum RecordLoop {
    /// Starts the loop's thread on `intake`, recording through `recorder` while it lives.
    static func start(intake: RecordIntake, recorder: RequestRecorder) {
        let thread = Thread { [weak recorder] in
            var round = IntakeRound()
            round.requests.reserveCapacity(RecordIntake.wakeAt)
            while intake.nextRound(into: &round) {
                recorder?.record(round: &round)
                intake.roundRecorded(&round)
            }
        }
        thread.name = "APIHealth.record"
        thread.start()
    }
}
