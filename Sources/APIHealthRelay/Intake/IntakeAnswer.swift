/// The relay's answer to a write: what InfluxDB would answer, so that the agent on the other side
/// does what it does with InfluxDB (204 done; 400 the named lines set aside, the rest taken; 401 kept and
/// retried; 413 split; 429 retried after `Retry-After`).
package struct IntakeAnswer: Sendable, Hashable {
    package var status: Int
    package var headers: [String: String]
    package var body: [UInt8]

    package init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Every line taken.
    package static let taken = IntakeAnswer(status: 204)

    /// An error as InfluxDB's v2 API writes one: `{"code": …, "message": …}`.
    package static func error(_ status: Int, code: String, message: String, headers: [String: String] = [:]) -> Self {
        var fields = headers
        fields["Content-Type"] = "application/json"
        let body = "{\"code\":\(jsonString(code)),\"message\":\(jsonString(message))}"
        return IntakeAnswer(status: status, headers: fields, body: Array(body.utf8))
    }

    /// A partial write, as InfluxDB 3 answers one: a 400 listing the refused lines by number (from 1, in
    /// the body after gzip) with their reasons, the rest taken. The message also says `dropped=N`, as
    /// InfluxDB 1.x's does.
    package static func partial(_ refused: [RefusedLine], of lines: Int) -> Self {
        let listed = refused.prefix(maximumListed)
        var body = "{\"error\":\"partial write of line protocol occurred: dropped=\(refused.count) of \(lines) lines\""
        body += ",\"data\":["
        for (position, line) in listed.enumerated() {
            if position > 0 { body += "," }
            body += "{\"original_line\":\(jsonString(line.text)),\"line_number\":\(line.number)"
            body += ",\"error_message\":\(jsonString("\(line.reason.rawValue): \(line.detail)"))}"
        }
        body += "]}"
        return IntakeAnswer(status: 400, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    /// The most refused lines a partial write's answer lists (its `dropped=N` counts them all).
    package static let maximumListed = 1_000

    /// `text` as a JSON string.
    static func jsonString(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                result +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// A line the relay refused: its number in the body (from 1), why, and its first 200 bytes.
package struct RefusedLine: Sendable, Hashable {
    package var number: Int
    package var reason: Refusal
    package var detail: String
    package var text: String
}
