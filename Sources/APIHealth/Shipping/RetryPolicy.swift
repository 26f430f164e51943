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
    public var initialDelay: Duration = .seconds(5)
    public var multiplier: Double = 2
    public var maximumDelay: Duration = .seconds(125)
    /// Each delay is scaled by a random factor in `1 ± jitter`, so agents do not retry in lockstep.
    public var jitter: Double = 0.2
    /// A batch still failing after this long is set aside in the spool's `rejected/` area (counted),
    /// so that it cannot hold back the batches behind it forever.
    public var maximumRetryDuration: Duration = .seconds(3_600)

    public init() {}

    /// The delay after the `attempt`-th failure (1-based), before jitter.
    public func baseDelay(afterAttempt attempt: Int) -> Duration {
        let exponent = Double(max(attempt - 1, 0))
        let seconds = initialDelay.secondsDouble * pow(multiplier, min(exponent, 64))
        return min(.seconds(seconds), maximumDelay)
    }

    /// The delay after the `attempt`-th failure, with jitter drawn from `random`.
    public func delay(afterAttempt attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let base = baseDelay(afterAttempt: attempt).secondsDouble
        let factor = jitter > 0 ? Double.random(in: (1 - jitter)...(1 + jitter), using: &random) : 1
        return .seconds(base * factor)
    }

    /// Parses a `Retry-After` value: delay-seconds, or an HTTP date relative to `now`.
    public static func retryAfter(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) {
                return .seconds(max(0, date.timeIntervalSince(now)))
            }
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
