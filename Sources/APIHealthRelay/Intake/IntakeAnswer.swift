import Foundation

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
        return IntakeAnswer(status: status, headers: fields, body: json(ErrorBody(code: code, message: message)))
    }

    /// A partial write, as InfluxDB 3 answers one: a 400 listing the refused lines by number (from 1, in
    /// the body after gzip) with their reasons, the rest taken. The message also says `dropped=N`, as
    /// InfluxDB 1.x's does.
    package static func partial(_ refused: [RefusedLine], of lines: Int) -> Self {
        let body = PartialBody(
            error: "partial write of line protocol occurred: dropped=\(refused.count) of \(lines) lines",
            data: refused.prefix(maximumListed).map { line in
                PartialBody.Line(
                    originalLine: line.text,
                    lineNumber: line.number,
                    errorMessage: "\(line.reason.rawValue): \(line.detail)"
                )
            }
        )
        return IntakeAnswer(status: 400, headers: ["Content-Type": "application/json"], body: json(body))
    }

    /// The most refused lines a partial write's answer lists (its `dropped=N` counts them all).
    package static let maximumListed = 1_000

    /// `value` as JSON (slashes as they are, as InfluxDB writes them).
    private static func json(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? encoder.encode(value)).map(Array.init) ?? Array(#"{"code":"internal error"}"#.utf8)
    }

    /// An error's body, as InfluxDB's v2 API writes one.
    private struct ErrorBody: Encodable {
        var code: String
        var message: String
    }

    /// A partial write's body, as InfluxDB 3 writes one.
    private struct PartialBody: Encodable {
        struct Line: Encodable {
            var originalLine: String
            var lineNumber: Int
            var errorMessage: String

            enum CodingKeys: String, CodingKey {
                case originalLine = "original_line"
                case lineNumber = "line_number"
                case errorMessage = "error_message"
            }
        }

        var error: String
        var data: [Line]
    }
}

/// A line the relay refused: its number in the body (from 1), why, and its first 200 bytes.
package struct RefusedLine: Sendable, Hashable {
    package var number: Int
    package var reason: Refusal
    package var detail: String
    package var text: String
}
