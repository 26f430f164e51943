import Foundation
import LineProtocol

/// An InfluxDB (or compatible) store batches are written to: one URL, or a failover group of URLs
/// that all reach the same data (Telegraf's model).
///
/// ```swift
/// let destination = InfluxDestination(
///     url: URL(string: "http://localhost:8086")!,
///     api: .v2(organization: "acme", bucket: "apihealth"),
///     token: InfluxToken("s3cr3t")
/// )
/// let cluster = InfluxDestination(
///     urls: [URL(string: "http://vminsert-1:8480/insert/0/influx")!, URL(string: "http://vminsert-2:8480/insert/0/influx")!],
///     api: .v2(organization: "", bucket: "")
/// )
/// ```
///
/// The agent starts at a random URL of the group, stays on it while it answers, and moves to the
/// next on a network error, a timeout, a 5xx, 429 or 503, or a configuration error (401, 403, 404);
/// each URL keeps its own backoff and `Retry-After`, and a batch is retried byte for byte on the next.
/// A path in a URL is kept in front of the write path: `http://vminsert:8480/insert/0/influx` writes
/// to `…/insert/0/influx/api/v2/write`.
public struct InfluxDestination: Sendable, Hashable {
    /// Which write endpoint to use.
    public enum WriteAPI: Sendable, Hashable {
        /// `POST /api/v2/write?org=&bucket=&precision=` (InfluxDB 2.x, Cloud, 1.8+ and 3.x compatibility,
        /// VictoriaMetrics, vmagent).
        case v2(organization: String, bucket: String)
        /// `POST /write?db=&rp=&precision=` (InfluxDB 1.x). Unsigned fields are written as integers.
        case v1(database: String, retentionPolicy: String? = nil)
        /// `POST /api/v3/write_lp?db=&precision=&accept_partial=true` (InfluxDB 3): a partial write keeps
        /// the lines the server took, and the refused ones are counted one by one and kept in `rejected/`.
        case v3(database: String)
    }

    /// How request bodies are sent.
    public enum Compression: Sendable, Hashable {
        /// `Content-Encoding: gzip` (the default).
        case gzip
        /// Plain line protocol, for sinks that refuse gzip.
        case identity
    }

    /// The failover group: URLs that reach the same data. Not empty.
    public var urls: [URL]
    /// The write endpoint and where in the store lines go.
    public var api: WriteAPI
    /// Sent as `Authorization: Token …` with every write request; `nil` sends none.
    public var token: InfluxToken?
    /// How it appears in logs and in the agent's health points; the first URL's host and port by default.
    public var name: String?
    /// Extra headers on every write request (`X-Scope-OrgID`, a proxy's key, …).
    public var headers: [String: String] = [:]
    /// How request bodies are sent (gzip by default).
    public var compression: Compression = .gzip
    /// This destination's own cap on its backlog; ``APIHealthConfiguration/Batching/maximumPendingBytes``
    /// when `nil`.
    public var maximumPendingBytes: Int?
    /// The timestamp precision this destination keeps, no finer than the agent's
    /// (``APIHealthConfiguration/precision``): its lines are rewritten to it as they are sent. `nil`: the
    /// agent's.
    public var precision: Precision?

    /// A destination at one URL.
    ///
    /// - Parameters:
    ///   - url: The server's base URL; a path in it is kept in front of the write path.
    ///   - api: The write endpoint and where in the store lines go.
    ///   - token: The API token, if the server needs one.
    public init(url: URL, api: WriteAPI, token: InfluxToken? = nil) {
        self.init(urls: [url], api: api, token: token)
    }

    /// A destination at a failover group of URLs.
    ///
    /// - Parameters:
    ///   - urls: Base URLs that all reach the same data, tried in turn from a random one; not empty.
    ///   - api: The write endpoint and where in the store lines go.
    ///   - token: The API token, if the servers need one.
    public init(urls: [URL], api: WriteAPI, token: InfluxToken? = nil) {
        self.urls = urls
        self.api = api
        self.token = token
    }

    /// The first URL of the group; setting it replaces the group with that URL.
    public var url: URL {
        get { urls[0] }
        set { urls = [newValue] }
    }

    /// The name it is logged with.
    public var displayName: String {
        if let name, !name.isEmpty { return name }
        guard let url = urls.first else { return "destination" }
        return (url.host ?? "destination") + (url.port.map { ":\($0)" } ?? "")
    }

    /// The URL as it may be shown or logged: user and password replaced by `<redacted>`.
    public var redactedURL: String { urls.map { Self.redacted($0.absoluteString) }.joined(separator: ",") }

    /// `text` (a URL) with any user information replaced by `<redacted>`.
    static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let authorityEnd =
            text[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
        guard let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@") else { return text }
        return String(text[..<scheme.upperBound]) + "<redacted>" + String(text[at...])
    }

    func validate() throws(APIHealthConfiguration.Error) {
        guard !urls.isEmpty else { throw .missingURL }
        for url in urls {
            let shown = Self.redacted(url.absoluteString)
            guard let scheme = url.scheme?.lowercased(), url.host != nil else { throw .relativeURL(shown) }
            guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(shown) }
        }
        for (name, value) in headers {
            let isToken = { (text: String) in
                !text.isEmpty && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != ":" }
            }
            guard isToken(name), !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw .invalidSetting(name: "headers", reason: "\"\(name)\" is not a header name with a one-line value")
            }
        }
        if let token {
            if token.value.isEmpty { throw .invalidSetting(name: "token", reason: "is empty") }
            if token.value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw .invalidSetting(name: "token", reason: "holds a line break or another control character")
            }
        }
    }

    /// The write endpoint the agent posts batches to for `precision`, with its query.
    ///
    /// ```swift
    /// let server = URL(string: "http://127.0.0.1:8086")!
    /// let destination = InfluxDestination(url: server, api: .v1(database: "metrics"))
    /// destination.writeURL(precision: .ns)  // http://127.0.0.1:8086/write?db=metrics&precision=ns
    /// ```
    ///
    /// - Parameter precision: The precision of the lines posted.
    /// - Returns: The write URL under the first URL of the group, with its query.
    package func writeURL(precision: Precision) -> URL {
        writeURL(at: url, precision: precision)
    }

    /// The write endpoint under `baseURL` (one URL of the group, its path kept in front) for `precision`.
    func writeURL(at baseURL: URL, precision: Precision) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        let base = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        switch api {
        case .v2(let organization, let bucket):
            components.path = base + "/api/v2/write"
            components.queryItems = [
                URLQueryItem(name: "org", value: organization), URLQueryItem(name: "bucket", value: bucket),
                URLQueryItem(name: "precision", value: precision.rawValue),
            ]
        case .v1(let database, let retentionPolicy):
            components.path = base + "/write"
            components.queryItems =
                [URLQueryItem(name: "db", value: database)]
                + (retentionPolicy.map { [URLQueryItem(name: "rp", value: $0)] } ?? [])
                + [
                    URLQueryItem(
                        name: "precision",
                        value: precision == .us ? "u" : precision == .ns ? "ns" : precision.rawValue
                    )
                ]
        case .v3(let database):
            let names: [Precision: String] = [.ns: "nanosecond", .us: "microsecond", .ms: "millisecond", .s: "second"]
            components.path = base + "/api/v3/write_lp"
            components.queryItems = [
                URLQueryItem(name: "db", value: database), URLQueryItem(name: "precision", value: names[precision]),
                URLQueryItem(name: "accept_partial", value: "true"),
            ]
        }
        return components.url!
    }
}

/// An InfluxDB API token. It prints as `<redacted>` so it never reaches logs, errors or files.
public struct InfluxToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    let value: String

    /// Wraps a token.
    ///
    /// - Parameter value: The token as InfluxDB issued it.
    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
