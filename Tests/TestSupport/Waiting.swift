/// How long a test waits for something it expects before calling its absence a failure: long enough
/// that a machine busy with other builds is never mistaken for a bug. A wait ends as soon as what it
/// waits for happens, so a passing test never spends it.
public let eventTimeout: Duration = .seconds(60)

/// Waits until `condition` holds, checking it every few milliseconds, for at most `timeout` of real
/// time. Returns whether it held.
///
/// ```swift
/// #expect(await waitUntil { agent.metrics.pointsWritten == 5 })
/// ```
public func waitUntil(
    timeout: Duration = eventTimeout,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + timeout
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}
