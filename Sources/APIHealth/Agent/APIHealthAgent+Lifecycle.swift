import Foundation
import LineProtocol
import Logging
import ServiceLifecycle

extension APIHealthAgent {
    /// `APIHealthConfiguration.shutdownDeadline`; returns once the spool is released.
    ///
    /// Its loops run in a task group it awaits. An agent runs once: a second call throws
    /// ``LifecycleError`` with code ``LifecycleError/Code/alreadyRun``.
    ///
    /// - Throws: ``LifecycleError`` when called again.
    public func run() async throws {
        guard claimRun() else { throw LifecycleError(code: .alreadyRun) }
        await runClaimed()
    }

    /// Starts ``run()`` in the background, for processes that do not use a `ServiceGroup`; stop it
    /// with ``shutdown(deadline:)``. Does nothing if the agent already runs or has run.
    public func start() {
        guard claimRun() else { return }
        Task { await self.runClaimed() }
    }

    private func claimRun() -> Bool {
        lifecycle.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .running
            return true
        }
    }

    /// What ended first in the supervisor's group.
    private enum Ended {
        /// Every loop is done: intake closed and everything went out (or nothing can be sent).
        case drained
        /// The shutdown deadline passed first.
        case shutdownDeadline
    }

    /// The supervisor: runs the loops until they have drained after shutdown began, or until the shutdown
    /// deadline, then lets go of the spool.
    private func runClaimed() async {
        if configuration.isEnabled { logStart() }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Ended.self) { group in
                group.addTask {
                    await self.runLoopsUntilDrained()
                    return .drained
                }
                group.addTask {
                    // Bounds the drain: once shutdown has begun, the loops get until its deadline.
                    for await _ in self.shutdownBegan.stream { break }
                    if !Task.isCancelled { try? await Task.sleep(for: self.lifecycle.withLock { $0.shutdownDeadline }) }
                    return .shutdownDeadline
                }
                _ = await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.beginShutdown(deadline: self.configuration.shutdownDeadline)
        }
        // Out of time (or cancelled) before the last round: the last health point stays in the spool.
        recordLastHealthPoint()
        // Without a spool, what is pending is lost: releaseSpool says so at warning.
        if !isDrained && !configuration.destinations.isEmpty && configuration.spool != nil {
            logger.info(
                "APIHealth stopped with lines pending; they stay in the spool",
                metadata: ["apihealth.pending.lines": "\(pending.currentMetrics.pendingLines)"]
            )
        }
        releaseSpool()
        lossReporter.reportDroppedAtCap(pending)
        lossReporter.summarize(pending)
        let waiters = lifecycle.withLock { state in
            state.phase = .finished
            return state.pass(.runEnded)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the agent's life has passed `milestone`.
    func wait(for milestone: Lifecycle.Milestone) async {
        await withCheckedContinuation { continuation in
            if !lifecycle.withLock({ $0.wait(for: milestone, continuation) }) { continuation.resume() }
        }
    }

    /// The loops, in the order a line meets them: the interval clock ends intervals (the record loop takes
    /// their points) and records health points, the spool worker writes batches through to the spool and
    /// compresses them, and one shipper per destination sends them. Delivery and the spool worker end on
    /// their own once intake has closed and they are done; then the last health point (the final counts) is
    /// recorded and sent in one more round.
    private func runLoopsUntilDrained() async {
        await withTaskGroup(of: Void.self) { timers in
            timers.addTask { await self.intervalClock.run() }
            // Each shipper's loop hands what it kept (the URL in use, its backoff) to its last round.
            let kept = await withTaskGroup(of: (index: Int, loop: Shipper.Loop)?.self) { drain in
                for (index, shipper) in shippers.enumerated() {
                    drain.addTask { (index, await shipper.run()) }
                }
                drain.addTask {
                    await self.spoolWorker.run()
                    return nil
                }
                var kept = [Shipper.Loop?](repeating: nil, count: shippers.count)
                for await case let (index, loop)? in drain { kept[index] = loop }
                return kept
            }
            if !Task.isCancelled {
                recordLastHealthPoint()
                await withTaskGroup(of: Void.self) { lastRound in
                    for (shipper, loop) in zip(shippers, kept) {
                        lastRound.addTask { await shipper.run(resuming: loop) }
                    }
                }
            }
            timers.cancelAll()
        }
    }

    private func logStart() {
        let destinations =
            configuration.destinations.isEmpty
            ? "none: lines stay in the spool"
            : configuration.destinations.map { "\($0.displayName) \($0.redactedURL)" }.joined(separator: "; ")
        logger.info(
            "APIHealth starts",
            metadata: [
                "apihealth.destinations": "\(destinations)",
                "apihealth.spool":
                    "\(configuration.spool?.directory.path ?? "none: pending lines are kept in memory only")",
            ]
        )
    }

    /// Sends the open batch now.
    public func flush() {
        recorder.catchUp()
        pending.sealOpenBatch()
    }

    /// Sends the open batch now and waits until nothing is pending, or `deadline` has passed.
    ///
    /// - Parameter deadline: How long to wait at most.
    /// - Returns: Whether everything was delivered (`false` also when there is no destination).
    @discardableResult
    public func flush(waitingUpTo deadline: Duration) async -> Bool {
        recorder.catchUp()
        pending.sealOpenBatch()
        return await waitUntilDelivered(deadline: deadline)
    }

    /// Waits until nothing is pending (or nothing can be sent), or `deadline` has passed.
    private func waitUntilDelivered(deadline: Duration) async -> Bool {
        let end = ContinuousClock.now + deadline
        while true {
            let seen = pending.departures
            if isDrained || configuration.destinations.isEmpty { break }
            let left = end - ContinuousClock.now
            if left <= .zero || Task.isCancelled { break }
            await pending.waitForDepartures(after: seen, atMost: left)
        }
        return isDrained
    }

    /// Stops intake and sends everything pending, including batches waiting to be retried, until
    /// `deadline` has passed; returns once ``run()`` has returned. What could not be sent stays in the
    /// spool for the next start.
    ///
    /// - Parameter deadline: How long to keep sending what is pending.
    public func shutdown(deadline: Duration = APIHealthConfiguration.defaultShutdownDeadline) async {
        beginShutdown(deadline: deadline)
        // Another caller may be closing intake: everything below needs it closed.
        await wait(for: .intakeClosed)
        let previous = lifecycle.withLock { state -> Lifecycle.Phase in
            let previous = state.phase
            if state.phase == .idle { state.phase = .finished }
            return previous
        }
        switch previous {
        case .idle:
            // Never ran: keep what is pending in the spool.
            recordLastHealthPoint()
            releaseSpool()
        case .running:
            await wait(for: .runEnded)
        case .finished:
            break
        }
    }

    /// Runs `body` once when shutdown begins (``shutdown(deadline:)`` or graceful shutdown), before
    /// intake closes, so what it records is in the final flush. A metrics backend writes its last
    /// aggregates here.
    ///
    /// ```swift
    /// agent.onShutdown { aggregator.writePendingPoints() }
    /// ```
    ///
    /// Bodies run in the order they were added, on the thread that begins shutdown, and must not add
    /// another body. One added after shutdown has begun never runs.
    ///
    /// - Parameter body: What to do; it may call ``write(_:)``.
    public func onShutdown(_ body: @escaping @Sendable () -> Void) {
        lifecycle.withLock { state in state.shutdownHooks?.append(body) }
    }

    /// Runs the ``onShutdown(_:)`` bodies, closes intake and lets the loops drain until `deadline`.
    /// Idempotent: the call that takes the bodies runs them (outside the lock: they are the user's code)
    /// and then closes intake, so what they record is in the final flush. The last health point is
    /// recorded once the rest has gone out (``recordLastHealthPoint()``).
    func beginShutdown(deadline: Duration) {
        let hooks = lifecycle.withLock { state -> [@Sendable () -> Void]? in
            defer { state.shutdownHooks = nil }
            return state.shutdownHooks
        }
        guard let hooks else { return }
        for body in hooks { body() }
        lifecycle.withLock { state in
            // No interval or health point is recorded after this: the last ones are recorded next.
            state.intakeOpen = false
            state.shutdownDeadline = deadline
        }
        // Outside the lock: the last drain runs the capture filter, which is the user's code.
        var lastIntervalPoints: [Point] = []
        recorder.close { lastIntervalPoints = recordLastIntervals() }
        for waiter in lifecycle.withLock({ $0.pass(.intakeClosed) }) { waiter.resume() }
        handToObservers(lastIntervalPoints)
        // Retries wait no longer: shutdown sends what is pending without waiting out backoff.
        pending.clearRetryWaits()
        shutdownBegan.continuation.yield()
        shutdownBegan.continuation.finish()
    }

    /// Writes what is left to the spool and lets go of it, warning once if points are lost.
    func releaseSpool() {
        let lost = pending.releaseSpool(logFailure: lossReporter.spoolWriteFailed)
        if lost > 0 {
            logger.warning(
                configuration.spool == nil
                    ? "APIHealth exits with points it could not deliver; without a spool they are lost"
                    : "APIHealth exits with points that are neither delivered nor in the spool",
                metadata: [
                    "apihealth.points.lost": "\(lost)",
                    "apihealth.spool.errors": "\(pending.currentMetrics.spoolWriteErrors)",
                ]
            )
        }
    }
}
