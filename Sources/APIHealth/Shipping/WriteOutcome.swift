import Foundation

/// What one write request's answer means for its batch.
enum WriteOutcome: Sendable, Equatable {
    /// 2xx: the batch is stored.
    case delivered
    /// 400, 422 and other 4xx: bad or partially bad data; not retried. `dropped` is the server's count
    /// when it gives one (InfluxDB's `partial write: … dropped=N`).
    case rejected(status: Int, message: String, dropped: Int?)
    /// InfluxDB 3's partial write: the server stored every line but these (numbered from 1), each
    /// with its reason.
    case partial(refused: [Int: String])
    /// 413: split the batch and send the halves.
    case tooLarge
    /// 401, 403, 404: a configuration problem. The data is kept and retried with backoff.
    case misconfigured(status: Int, message: String)
    /// 429, 503, other 5xx, timeouts and network errors: retry, after `retryAfter` when the server said.
    /// `unreachable` when no server answered (the connection failed or timed out).
    case retry(reason: String, retryAfter: Duration?, unreachable: Bool = false)

    static func classify(status: Int, headers: [String: String], body: Data, now: Date = Date()) -> WriteOutcome {
        let message = String(decoding: body.prefix(4_096), as: UTF8.self)
        if status == 400, let refused = partialWriteLines(in: body) { return .partial(refused: refused) }
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

    /// The refused lines of an InfluxDB 3 partial write (`{"error": "partial write of line protocol
    /// occurred", "data": [{"line_number": 2, "error_message": "…", "original_line": "…"}]}`), by
    /// number; `nil` for any other body.
    static func partialWriteLines(in body: Data) -> [Int: String]? {
        guard body.count < 4 << 20,
            let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            (object["error"] as? String)?.hasPrefix("partial write of line protocol occurred") == true,
            let data = object["data"] as? [[String: Any]]
        else { return nil }
        var refused: [Int: String] = [:]
        for item in data {
            guard let number = (item["line_number"] as? NSNumber)?.intValue, number > 0 else { continue }
            refused[number] = (item["error_message"] as? String) ?? "refused"
        }
        return refused.isEmpty ? nil : refused
    }

    /// The `dropped=N` count of an InfluxDB partial-write message.
    static func droppedCount(in message: String) -> Int? {
        guard let range = message.range(of: "dropped=") else { return nil }
        return Int(message[range.upperBound...].prefix { $0.isNumber })
    }
}
