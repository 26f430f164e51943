import Foundation

/// How long to wait before sending a failed batch again.
///
/// ```swift
/// var retry = RetryPolicy()
/// retry.initialDelay = .seconds(1)  // 1 s, 2 s, 4 s … capped at maximumDelay, ± jitter
/// ```
///
/// Network errors and 5xx answers back off exponentially; `429` and `503` wait for the server's
/// `Retry-After` when it gives one.
public struct RetryPolicy: Sendable, Hashable {
    /// The delay after the first failure. Not negative, and at most ``maximumDelay``.
    public var initialDelay: Duration = .seconds(5)
    /// How much each delay grows over the one before: finite, and at least 1.
    public var multiplier: Double = 2
    /// No delay is longer, jitter included. Not negative.
    public var maximumDelay: Duration = .seconds(125)
    /// Each delay is scaled by a random factor in `1 ± jitter` (0 through 1), so agents do not retry in
    /// lockstep; a delay scaled past ``maximumDelay`` is cut to it.
    public var jitter: Double = 0.2
    /// A destination that cannot be reached (connection refused, timeout) is tried again at least this
    /// often, whatever the backoff has grown to, so delivery resumes within seconds of it coming back;
    /// a server that answers with an error (5xx, 429, 503) gets the whole backoff.
    public var maximumReconnectDelay: Duration = .seconds(4)
    /// A batch still failing after this long is set aside in the spool's `rejected/` area (counted),
    /// so that it cannot hold back the batches behind it forever. Not negative.
    public var maximumRetryDuration: Duration = .seconds(3_600)

    /// The defaults: 5 s doubling up to 125 s, ±20 % jitter, a reconnect probe every 4 s, one hour.
    public init() {}

    /// The delay after the `attempt`-th failure (1-based), before jitter: `initialDelay × multiplierⁿ⁻¹`,
    /// at most ``maximumDelay``, for any attempt count.
    ///
    /// - Parameter attempt: How many attempts have failed; 0 and below count as 1.
    /// - Returns: A delay from zero through ``maximumDelay``.
    package func baseDelay(afterAttempt attempt: Int) -> Duration {
        let exponent = Double(max(attempt - 1, 0))
        let seconds = initialDelay.secondsDouble * pow(multiplier, min(exponent, 64))
        return clamped(seconds: seconds)
    }

    /// The delay after the `attempt`-th failure, with jitter drawn from `random`.
    ///
    /// - Parameters:
    ///   - attempt: How many attempts have failed (1-based).
    ///   - random: The source of the jitter.
    /// - Returns: A delay from zero through ``maximumDelay``.
    package func delay(afterAttempt attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let base = baseDelay(afterAttempt: attempt).secondsDouble
        // An unvalidated jitter outside 0...1 (or NaN) must not make the range below invalid.
        let spread = jitter.isFinite ? min(max(jitter, 0), 1) : 0
        let factor = spread > 0 ? Double.random(in: (1 - spread)...(1 + spread), using: &random) : 1
        return clamped(seconds: base * factor)
    }

    /// `seconds` as a duration from zero through ``maximumDelay``. The comparison is made on the
    /// `Double`: `Duration.seconds(_:)` traps on a value past `Int64` seconds, and on NaN.
    private func clamped(seconds: Double) -> Duration {
        let maximum = max(maximumDelay, .zero)
        guard seconds < maximum.secondsDouble else { return maximum }
        guard seconds > 0 else { return .zero }
        return min(.seconds(seconds), maximum)
    }

    /// Checks the settings their types cannot: a finite multiplier of at least 1, a jitter from 0
    /// through 1, delays that are not negative and an initial delay no longer than the maximum.
    ///
    /// - Throws: ``APIHealthConfiguration/Error/invalidValue(name:value:)`` naming the first setting
    ///   that is out of range (`retry.multiplier`, `retry.jitter`, `retry.initialDelay`, …).
    public func validate() throws(APIHealthConfiguration.Error) {
        if !multiplier.isFinite || multiplier < 1 {
            throw .invalidValue(name: "retry.multiplier", value: "\(multiplier)")
        }
        if !jitter.isFinite || jitter < 0 || jitter > 1 {
            throw .invalidValue(name: "retry.jitter", value: "\(jitter)")
        }
        if initialDelay < .zero { throw .invalidValue(name: "retry.initialDelay", value: "\(initialDelay)") }
        if maximumDelay < .zero { throw .invalidValue(name: "retry.maximumDelay", value: "\(maximumDelay)") }
        if initialDelay > maximumDelay {
            throw .invalidValue(
                name: "retry.initialDelay",
                value: "\(initialDelay) (over retry.maximumDelay \(maximumDelay))"
            )
        }
        if maximumReconnectDelay < .zero {
            throw .invalidValue(name: "retry.maximumReconnectDelay", value: "\(maximumReconnectDelay)")
        }
        if maximumRetryDuration < .zero {
            throw .invalidValue(name: "retry.maximumRetryDuration", value: "\(maximumRetryDuration)")
        }
    }

    /// Parses a `Retry-After` value: delay-seconds, or an HTTP date relative to `now`.
    package static func retryAfter(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 { return .seconds(seconds) }
        if let seconds = HTTPDate.secondsSinceEpoch(trimmed) {
            return .seconds(max(0, Double(seconds) - now.timeIntervalSince1970))
        }
        return nil
    }
}

extension Duration {
    var secondsDouble: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole nanoseconds over 10⁶, so the encoder writes it as the short decimal it is (`12.345678`).
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflow2) = nanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow || overflow2 { return secondsDouble * 1_000 }
        return Double(total) / 1_000_000
    }
}
