/// How long a test waits for something it expects before calling its absence a failure: long enough
/// that a machine busy with other builds is never mistaken for a bug. A wait ends as soon as what it
/// waits for happens, so a passing test never spends it.
public let eventTimeout: Duration = .seconds(60)

/// Waits until `condition` holds, for at most `timeout` of real time. Returns whether it held. The
/// condition is checked at once, then at growing intervals (5 ms to 100 ms), so that a long wait
/// does not load the machine it waits on.
///
/// ```swift
/// #expect(await waitUntil { agent.metrics.pointsWritten == 5 })
/// ```
public func waitUntil(
    timeout: Duration = eventTimeout,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + timeout
    var pause = Duration.milliseconds(5)
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: pause)  // the poll between checks; the wait ends when the condition holds
        pause = min(pause * 2, .milliseconds(100))
    }
    return try await condition()
}

/// A `selfMetricsInterval` for tests that must see no periodic health point: the agent's intervals end at
/// whole multiples of themselves since the Unix epoch, so a day's interval ends at every midnight UTC (a
/// test running then, or advancing its manual clock across it, saw one point more), while this one's
/// first end is in 2070.
public let noPeriodicHealthPoint: Duration = .seconds(100 * 365 * 86_400)

/// Runs `operation` and returns what it returns, or `nil` if it has not returned within `timeout` of real
/// time (it is then cancelled): for an event the test awaits directly, such as a shutdown, with a bound.
///
/// ```swift
/// #expect(await finishes { await agent.shutdown(deadline: .seconds(3_600)) } != nil)
/// ```
public func finishes<Value: Sendable>(
    within timeout: Duration = eventTimeout,
    _ operation: @escaping @Sendable () async -> Value
) async -> Value? {
    await withTaskGroup(of: Value?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
