import Foundation
import LineProtocol

extension APIHealthAgent {
    /// Returns once the agent's record loop has recorded every sample queued before the call: for a
    /// benchmark whose measurement must include the recording it times.
    @_spi(Benchmarking) public func waitUntilRecorded() {
        recorder.catchUp()
    }

    #if os(Linux)
    /// The CPU time the agent's record loop has used so far (zero before it started): for a benchmark
    /// that counts recording on both sides of the intake. Only while the agent's intake is open.
    @_spi(Benchmarking) public var recordLoopCPUTime: Duration { recorder.intake.loopCPUTime() ?? .zero }
    #endif

    /// Puts the agent's periodic work on its interval clock: the interval points at the end of every
    /// aggregation interval, and the health point every ``APIHealthConfiguration/selfMetricsInterval``.
    func scheduleIntervalWork() {
        guard configuration.isEnabled else { return }
        if let aggregation = configuration.aggregation {
            intervalClock.every(aggregation.interval) { [weak self] end in
                self?.recordIntervalPoints(endingAt: end) ?? false
            }
        }
        intervalClock.every(configuration.selfMetricsInterval) { [weak self] _ in
            self?.recordHealthPoint() ?? false
        }
    }

    /// Runs `tick` at the end of every `interval` (whole multiples of it since the Unix epoch, on the
    /// agent's clock) while the agent runs and its intake is open, until it returns `false`: for a
    /// metrics backend's interval. It runs under the agent's lifecycle lock: it may record, and must not
    /// call back into the agent's life cycle.
    ///
    /// - Parameters:
    ///   - interval: How often.
    ///   - tick: What to do; returns whether to go on.
    package func everyInterval(_ interval: Duration, _ tick: @escaping @Sendable () -> Bool) {
        intervalClock.every(interval) { [weak self] _ in
            guard let self else { return false }
            // Under the lock while intake is open, as the interval points: no tick writes after intake
            // has closed (its points would be dropped), and the backend's last write is its shutdown one.
            return self.lifecycle.withLock { state in state.intakeOpen && tick() }
        }
    }

    /// Hands `observer` the interval points of every interval from now on, the last ones included, as
    /// they are recorded: for a local summary that counts every request whether or not its lines were
    /// already delivered (the demo's). Called outside the agent's locks, on the interval clock's thread.
    ///
    /// ```swift
    /// agent.observeIntervalPoints { points in summary.withLock { for p in points { $0.add(intervalPoint: p) } } }
    /// ```
    ///
    /// - Parameter observer: Given each interval's points; must not block.
    @_spi(Benchmarking) public func observeIntervalPoints(_ observer: @escaping @Sendable ([Point]) -> Void) {
        lifecycle.withLock { $0.intervalObservers.append(observer) }
    }

    /// Hands `points` to every interval observer, outside the agent's locks.
    func handToObservers(_ points: [Point]) {
        guard !points.isEmpty else { return }
        for observer in lifecycle.withLock({ $0.intervalObservers }) { observer(points) }
    }

    /// Records one point per endpoint that saw requests since the last interval, stamped `end`, and
    /// returns once they are recorded. Returns `false` once intake has closed (the last ones are recorded
    /// when it closes). The interval clock calls it at the end of every interval.
    ///
    /// The agent's record loop takes the points, in its turn with the requests: every request that
    /// ended before the call is counted in the interval, and the last interval points, taken as intake
    /// closes, come after these.
    @discardableResult
    @_spi(Benchmarking) public func recordIntervalPoints(endingAt end: Timestamp) -> Bool {
        guard let aggregator = schema.aggregator else { return false }
        let intervalEnd = IntervalEnd(stamp: installStamp(ofIntervalEndingAt: end))
        guard recorder.endInterval(intervalEnd, now: clock.coarseNow) else { return false }
        handToObservers(intervalEnd.points)
        lossReporter.reportEndpointOverflow(pending, limit: aggregator.options.maximumEndpoints)
        return true
    }

    /// The instant interval points of the interval ending at `end` are stamped at: the end itself for an
    /// agent with an `instance` tag (its series are its own); without one, where installs or replicas
    /// share their series, an instant drawn at random within the interval (a whole unit of the precision
    /// after its start, up to its end), so points of many installs do not share a timestamp (see
    /// <doc:Timestamps>).
    func installStamp(ofIntervalEndingAt end: Timestamp) -> Timestamp {
        guard configuration.instance.isEmpty, let interval = configuration.aggregation?.interval,
            let nanoseconds = RequestSchema.wholeNanoseconds(interval)
        else { return end }
        let unit = configuration.precision.nanosecondsPerUnit
        let units = nanoseconds / unit
        guard units > 1 else { return end }
        return end.adding(nanoseconds: -Int64.random(in: 0..<units) * unit)
    }

    /// The interval points of the interval shutdown cuts short, stamped now (never an interval's end, which
    /// a restarted replica of the same name writes for the interval it starts in). Returns them, for the
    /// observers once shutdown has closed intake.
    func recordLastIntervals() -> [Point] {
        guard configuration.isEnabled, let aggregator = schema.aggregator else { return [] }
        let unit = configuration.precision.nanosecondsPerUnit
        var now = nowTimestamp.nanosecondsSinceEpoch / unit * unit
        let interval = RequestSchema.wholeNanoseconds(aggregator.options.interval) ?? Int64.max
        if now % interval == 0 { now -= unit }
        // The record loop has ended (intake closed, every request recorded): the aggregates are this thread's.
        let points = recorder.recordIntervalPoints(
            at: Timestamp(nanosecondsSinceEpoch: now),
            closing: true,
            now: clock.coarseNow
        )
        recorder.publishCounts()
        return points
    }

    /// Records the agent's health point while intake is open; `false` once it has closed. The interval
    /// clock calls it every ``APIHealthConfiguration/selfMetricsInterval``.
    @discardableResult
    @_spi(Benchmarking) public func recordHealthPoint() -> Bool {
        lifecycle.withLock { state -> Bool in
            // Under the lock, so no health point follows the last one shutdown records.
            if state.intakeOpen { pending.record(healthPoint(), now: clock.coarseNow) }
            return state.intakeOpen
        }
    }

    /// Records the agent's last health point once, after intake has closed: when everything before it
    /// was sent (so it reports the final counts, and is sent itself), or when the drain ends without
    /// that (it stays in the spool). Nothing for a disabled agent.
    func recordLastHealthPoint() {
        guard configuration.isEnabled, pending.isClosed else { return }
        let first = lifecycle.withLock { state -> Bool in
            defer { state.lastHealthPointRecorded = true }
            return !state.lastHealthPointRecorded
        }
        if first { pending.record(healthPoint(), now: clock.now, afterClose: true) }
    }

    /// `service`, `instance` and the global tags, with the country the record loop learned so far (as it
    /// published it).
    var everyPointTags: [Point.Tag] { pending.publishedCountry?.everyPointTags ?? configuration.everyPointTags }

    /// The agent's health point now, from its counters as they are.
    private func healthPoint() -> Point {
        AgentHealthPoint.make(
            completed(pending.currentMetrics),
            tags: everyPointTags,
            configuration: configuration,
            at: nowTimestamp
        )
    }
}
