import Foundation
import LineProtocol

/// The agent's one interval clock: runs each job at the end of every one of its intervals, on the agent's
/// clock, while ``run()`` runs. Interval ends are whole multiples of the interval since the Unix epoch, so
/// every replica's intervals line up (on the corrected clock when the agent corrects a device's clock);
/// each job's ends only move forward, so no two ticks of a job carry the same end — but when a corrected
/// clock is stepped, the next tick ends at the last end the corrected clock has passed. The interval points,
/// the health point and a metrics backend's points are its jobs.
///
/// ```swift
/// let intervals = IntervalClock(clock: SystemAgentClock())
/// intervals.every(.seconds(10)) { end in recordIntervalPoints(endingAt: end) }
/// await intervals.run()
/// ```
final class IntervalClock: Sendable {
    /// What a job does at the end of an interval; returns `false` when it is done for good.
    typealias Tick = @Sendable (_ end: Timestamp) -> Bool

    private struct ScheduledJob: Sendable {
        /// The interval, in nanoseconds.
        let interval: Int64
        /// The end of the interval it ticks for next, in nanoseconds since the Unix epoch.
        var end: Int64
        /// When that is on the agent's clock.
        var due: Duration
        /// How many times the wall clock had been stepped when ``end`` was set.
        var steps: UInt64
        let tick: Tick
    }

    private let clock: any AgentClock
    /// The wall time intervals end on, in nanoseconds since the epoch: the agent's, corrected when it
    /// corrects its clock.
    private let wallNow: @Sendable () -> Int64
    /// How many times the wall clock has been stepped (a device's clock corrected): a job's end set
    /// before a step is set again from the corrected clock.
    private let wallClockSteps: @Sendable () -> UInt64
    /// The jobs added from any thread, which ``run()`` takes: the jobs are its own.
    private let added = Mailbox<ScheduledJob>()

    /// A clock on `clock` with no job yet.
    ///
    /// - Parameters:
    ///   - clock: The agent's clock: how long to wait for an interval's end.
    ///   - correction: The correction of the device's clock, when the agent corrects it: intervals end on
    ///     the corrected clock.
    init(clock: any AgentClock, correction: ClockCorrection? = nil) {
        self.clock = clock
        self.wallNow = { (correction?.now ?? clock.wallNow).nanosecondsSinceEpoch }
        self.wallClockSteps = { correction?.steps ?? 0 }
    }

    /// Runs `tick` at the end of every `interval` from now on.
    ///
    /// - Parameters:
    ///   - interval: How often; an interval of zero or less (or too long to count in nanoseconds) is
    ///     taken as one hour.
    ///   - tick: What to do, given the interval's end; returns `false` to stop.
    func every(_ interval: Duration, _ tick: @escaping Tick) {
        let nanoseconds = RequestSchema.wholeNanoseconds(interval).flatMap { $0 > 0 ? $0 : nil } ?? 3_600_000_000_000
        let wallNow = wallNow()
        let end = (wallNow / nanoseconds + 1) * nanoseconds
        let due = clock.now + .nanoseconds(end - wallNow)
        added.post(ScheduledJob(interval: nanoseconds, end: end, due: due, steps: wallClockSteps(), tick: tick))
    }

    /// Waits for each interval's end and runs the jobs due, until cancelled. The jobs are this task's
    /// alone: `every` posts a new one, taken here before each wait and after it.
    func run() async {
        var jobs: [ScheduledJob] = []
        while !Task.isCancelled {
            jobs += added.takePosted()
            await added.wait(until: jobs.map(\.due).min(), on: clock)
            if Task.isCancelled { return }
            jobs += added.takePosted()
            let now = clock.now
            let steps = wallClockSteps()
            var index = 0
            while index < jobs.count {
                let job = jobs[index]
                guard job.due <= now else {
                    index += 1
                    continue
                }
                // The end it was scheduled for, unless the wall clock was stepped since (a device's clock
                // corrected): then the last end the corrected clock has passed.
                let ended = job.steps == steps ? job.end : wallNow() / job.interval * job.interval
                guard job.tick(Timestamp(nanosecondsSinceEpoch: ended)) else {
                    jobs.remove(at: index)
                    continue
                }
                // The next end after the wall clock's now, and after the end just ticked (the agent's clock
                // and the wall clock drift apart a little).
                let wallNow = wallNow()
                let end = max((wallNow / job.interval + 1) * job.interval, ended + job.interval)
                jobs[index].end = end
                jobs[index].steps = steps
                jobs[index].due = clock.now + .nanoseconds(max(0, end - wallNow))
                index += 1
            }
        }
    }
}
