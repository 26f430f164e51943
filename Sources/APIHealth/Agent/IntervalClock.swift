import Foundation
import LineProtocol

/// The agent's one interval clock: runs each job at the end of every one of its intervals, on the agent's
/// clock, while ``run()`` runs. Interval ends are whole multiples of the interval since the Unix epoch, so
/// every replica's intervals line up; each job's ends only move forward, so no two ticks of a job carry
/// the same end. The interval points, the health point and a metrics backend's points are its jobs.
///
/// ```swift
/// let intervals = IntervalClock(clock: SystemAgentClock())
/// intervals.every(.seconds(10)) { end in recordIntervalPoints(endingAt: end) }
/// await intervals.run()
/// ```
final class IntervalClock: Sendable {
    /// What a job does at the end of an interval; returns `false` when it is done for good.
    typealias Tick = @Sendable (_ end: Timestamp) -> Bool

    private struct ScheduledJob {
        let identifier: Int
        /// The interval, in nanoseconds.
        let interval: Int64
        /// The end of the interval it ticks for next, in nanoseconds since the Unix epoch.
        var end: Int64
        /// When that is on the agent's clock.
        var due: Duration
        let tick: Tick
    }

    private struct Jobs {
        var scheduled: [ScheduledJob] = []
        var nextIdentifier = 0
    }

    private let clock: any AgentClock
    /// Guards the jobs: added from any thread, taken by ``run()``. A leaf of the lock order.
    private let jobs = Locked(Jobs())
    /// Wakes ``run()`` when a job is added.
    private let added = Wakeup()

    /// A clock on `clock` with no job yet.
    ///
    /// - Parameter clock: The agent's clock: how long to wait for an interval's end.
    init(clock: any AgentClock) {
        self.clock = clock
    }

    /// Runs `tick` at the end of every `interval` from now on.
    ///
    /// - Parameters:
    ///   - interval: How often; an interval of zero or less (or too long to count in nanoseconds) is
    ///     taken as one hour.
    ///   - tick: What to do, given the interval's end; returns `false` to stop.
    func every(_ interval: Duration, _ tick: @escaping Tick) {
        let nanoseconds = RequestSchema.wholeNanoseconds(interval).flatMap { $0 > 0 ? $0 : nil } ?? 3_600_000_000_000
        let wallNow = Self.nanosecondsSinceEpoch()
        let end = (wallNow / nanoseconds + 1) * nanoseconds
        let due = clock.now + .nanoseconds(end - wallNow)
        jobs.withLock { jobs in
            jobs.scheduled.append(
                ScheduledJob(identifier: jobs.nextIdentifier, interval: nanoseconds, end: end, due: due, tick: tick)
            )
            jobs.nextIdentifier += 1
        }
        added.signal()
    }

    /// Waits for each interval's end and runs the jobs due, until cancelled.
    func run() async {
        while !Task.isCancelled {
            let next = jobs.withLock { $0.scheduled.map(\.due).min() }
            await added.wait(until: next, on: clock)
            if Task.isCancelled { return }
            let now = clock.now
            let due = jobs.withLock { jobs in jobs.scheduled.filter { $0.due <= now } }
            for job in due {
                let goesOn = job.tick(Timestamp(nanosecondsSinceEpoch: job.end))
                let wallNow = Self.nanosecondsSinceEpoch()
                jobs.withLock { jobs in
                    guard let index = jobs.scheduled.firstIndex(where: { $0.identifier == job.identifier }) else {
                        return
                    }
                    guard goesOn else {
                        jobs.scheduled.remove(at: index)
                        return
                    }
                    // The next end after the wall clock's now, and after the end just ticked (the agent's
                    // clock and the wall clock drift apart a little).
                    let end = max((wallNow / job.interval + 1) * job.interval, job.end + job.interval)
                    jobs.scheduled[index].end = end
                    jobs.scheduled[index].due = clock.now + .nanoseconds(max(0, end - wallNow))
                }
            }
        }
    }

    /// Nanoseconds since the Unix epoch, from the wall clock.
    static func nanosecondsSinceEpoch() -> Int64 {
        let timestamp = Timestamp(date: Date())
        return timestamp.seconds * 1_000_000_000 + timestamp.nanoseconds
    }
}
