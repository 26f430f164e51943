import Foundation

/// What one write request's answer means for its batch.
enum WriteOutcome: Sendable, Equatable {
    /// 2xx: the batch is stored.
    case delivered
    /// 400, 422 and other 4xx: bad or partially bad data; not retried. `dropped` is the server's count
    /// when it gives one (InfluxDB's `partial write: … dropped=N`).
    case rejected(status: Int, message: String, dropped: Int?)
    /// 413: split the batch and send the halves.
    case tooLarge
    /// 401, 403, 404: a configuration problem. The data is kept and retried with backoff.
    case misconfigured(status: Int, message: String)
    /// 429, 503, other 5xx, timeouts and network errors: retry, after `retryAfter` when the server said.
    case retry(reason: String, retryAfter: Duration?)

    static func classify(status: Int, headers: [String: String], body: Data, now: Date = Date()) -> WriteOutcome {
        let message = String(decoding: body.prefix(4_096), as: UTF8.self)
        switch status {
        case 200..<300:
            return .delivered
        case 413:
            return .tooLarge
        case 401, 403, 404:
            return .misconfigured(status: status, message: message)
        case 408, 429, 500..<600:
            let retryAfter = headers["retry-after"].flatMap { RetryPolicy.retryAfter($0, now: now) }
            return .retry(reason: "HTTP \(status) \(message)", retryAfter: retryAfter)
        default:
            return .rejected(status: status, message: message, dropped: droppedCount(in: message))
        }
    }

    /// The `dropped=N` count of an InfluxDB partial-write message.
    static func droppedCount(in message: String) -> Int? {
        guard let range = message.range(of: "dropped=") else { return nil }
        return Int(message[range.upperBound...].prefix { $0.isNumber })
    }
}
