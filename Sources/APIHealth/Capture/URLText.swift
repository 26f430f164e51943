import Foundation

/// URLs that capture is given as text (AsyncHTTPClient's and Vapor's requests), kept as text when they
/// are plain: the agent reads a URL's scheme, host, port and path from its text (``URLParts``), so a
/// request to a URL not seen before is recorded without parsing a `URL` (about 5,500 instructions).
package enum URLText {
    /// Whether `text` is a plain absolute URL (``URLParts``) made only of the characters a URL may hold
    /// as they are (letters, digits, `-._~!$&'()*+,;=:@/?`, no escape, no fragment), with a port
    /// that fits: `URL(string:)` takes it unchanged (its `absoluteString` is `text`).
    package static func isSafe(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let (_, _, port, _) = URLParts.split(bytes), (port ?? 0) <= 65_535 else { return false }
            for byte in bytes where !safe(byte) { return false }
            return true
        } ?? false
    }

    /// What a sample keeps of the URL `text`: the text itself when ``isSafe(_:)`` (nothing parsed), else
    /// its URL; `nil` when it does not parse or has no host. Nothing is cached: the check reads the text
    /// once, and a URL that is not plain (an escape, a user, an IPv6 literal) is parsed each time.
    ///
    /// ```swift
    /// URLText.kept("https://api.example.com/users/1")  // .text, not parsed
    /// ```
    package static func kept(_ text: String) -> KeptURL? {
        isSafe(text) ? .text(text) : url(text).map(KeptURL.url)
    }

    /// The URL `text` names if it has a host, else `nil` (parsed each time).
    package static func url(_ text: String) -> URL? {
        guard let url = URL(string: text), url.host != nil else { return nil }
        return url
    }

    private static func safe(_ byte: UInt8) -> Bool {
        byte < 64 ? safeBelow64 >> byte & 1 == 1 : byte < 128 && safeFrom64 >> (byte - 64) & 1 == 1
    }

    /// The safe bytes below 64, one bit each: the digits and `-.!$&'()*+,;=:/?`.
    private static var safeBelow64: UInt64 { 0xAFFF_FFD2_0000_0000 }
    /// The safe bytes from 64 to 127, one bit each: the letters and `_~@`.
    private static var safeFrom64: UInt64 { 0x47FF_FFFE_87FF_FFFF }
}

/// A URL as a sample keeps it (see ``URLText/kept(_:)``).
package enum KeptURL: Sendable {
    /// Text that `URL(string:)` takes unchanged.
    case text(String)
    case url(URL)
}

extension RequestSample {
    /// A sample of one request whose URL is `urlText`, which ``URLText/isSafe(_:)``: kept as text, and
    /// only parsed if something reads ``url``.
    package init(
        method: String,
        urlText: String,
        module: String,
        startedAt: Date,
        duration: Duration,
        statusCode: Int?,
        error: TransportError?,
        requestBytes: UInt64,
        responseBytes: UInt64,
        timeToFirstByte: Duration?,
        redirectCount: Int?,
        correlationID: String?
    ) {
        self.init(
            method: method,
            parsedURL: nil,
            keptText: urlText,
            module: module,
            startedAt: startedAt,
            duration: duration,
            statusCode: statusCode,
            error: error,
            requestBytes: requestBytes,
            responseBytes: responseBytes,
            timeToFirstByte: timeToFirstByte,
            redirectCount: redirectCount,
            correlationID: correlationID
        )
    }
}
