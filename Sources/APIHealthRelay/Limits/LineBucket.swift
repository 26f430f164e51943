/// A token bucket of lines: `perMinute` lines a minute, a minute's worth at once. A write of `n` lines
/// is let through when the bucket holds `n` (or is full, for a write larger than a minute's worth: it
/// then owes the difference), and refused otherwise with the time until it would be let through.
///
/// ```swift
/// var bucket = LineBucket(perMinute: 600, now: .zero)
/// bucket.admit(100, now: .zero)        // nil: let through
/// bucket.admit(600, now: .seconds(1))  // .seconds(10): wait for the 110 lines refilled in 11 s
/// ```
package struct LineBucket: Sendable, Hashable {
    /// Lines held now (negative while a write larger than the bucket is paid off).
    private(set) var tokens: Double
    private var updated: Duration

    package init(perMinute: Int, now: Duration) {
        tokens = Double(perMinute)
        updated = now
    }

    /// How long until `lines` would be let through (`nil`: now); does not take them.
    package mutating func wait(for lines: Int, perMinute: Int, now: Duration) -> Duration? {
        let capacity = Double(perMinute)
        let elapsed =
            now > updated
            ? Double((now - updated).components.seconds) + Double((now - updated).components.attoseconds) / 1e18 : 0
        tokens = min(capacity, tokens + elapsed * capacity / 60)
        updated = max(updated, now)
        let needed = min(Double(lines), capacity)
        if tokens >= needed { return nil }
        let seconds = (needed - tokens) * 60 / capacity
        return .milliseconds(Int64((seconds * 1_000).rounded(.up)))
    }

    /// Takes `lines` (after ``wait(for:perMinute:now:)`` said they may go).
    package mutating func take(_ lines: Int) {
        tokens -= Double(lines)
    }
}
