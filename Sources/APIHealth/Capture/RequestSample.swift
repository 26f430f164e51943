import Foundation

/// What one HTTP request did: when, how long, what came back. The agent turns it into a point.
///
/// The URLSession hook fills it in for you; for other HTTP clients (AsyncHTTPClient, say) fill it in
/// and call ``APIHealthAgent/record(_:)``:
///
/// ```swift
/// let started = Date()
/// let clock = ContinuousClock.now
/// let response = try await httpClient.execute(request, timeout: .seconds(10))
/// agent.record(RequestSample(
///     method: "GET", url: URL(string: request.url)!, module: "billing", startedAt: started,
///     duration: ContinuousClock.now - clock, statusCode: Int(response.status.code)))
/// ```
///
/// Only the URL's scheme, host, port and path are used: the query, fragment and user info never are.
public struct RequestSample: Sendable {
    /// The HTTP method (`GET`, `POST`, …).
    public var method: String
    /// The request's URL; only its scheme, host, port and path are recorded.
    public var url: URL {
        get {
            if let parsedURL { return parsedURL }
            // Kept text is text `URL(string:)` takes (`URLText.isSafe`); `invalid` is never reached.
            return URL(string: keptText ?? "") ?? URL(string: "http://invalid")!
        }
        set {
            parsedURL = newValue
            keptText = graphQLOperation.map { Self.seriesText(newValue.absoluteString, operation: $0) }
        }
    }
    /// The URL as `url.absoluteString` gives it, read without making a URL of a sample given its URL as
    /// text; for a GraphQL operation, the text its series is cached by (see ``setGraphQLOperation(_:)``).
    var urlText: String { keptText ?? parsedURL?.absoluteString ?? "" }
    /// The URL, unless capture was given it as text that it kept (see ``URLText``): a URL is only parsed
    /// when something reads it.
    @usableFromInline var parsedURL: URL?
    /// A URL's text that ``URLText/isSafe(_:)`` (`URL(string:)` takes it as it is), when `parsedURL` is `nil`;
    /// with `parsedURL` set, the text of a GraphQL operation's series (never parsed as a URL).
    @usableFromInline var keptText: String?
    /// The path segment of the GraphQL operation the request carried (``GraphQLOperation``), set by capture
    /// for a request to one of ``APIHealthConfiguration/CaptureOptions/graphQLPaths``: its `path` tag is
    /// then that path and this segment.
    package private(set) var graphQLOperation: String?

    /// Makes the sample a request for the GraphQL operation `segment` (a ``GraphQLOperation`` segment): its
    /// URL stays what it is, and the text the schema finds its series by (``urlText``) becomes the URL's
    /// scheme, authority and path followed by `#graphql=` and the segment, so each operation has a series of
    /// its own and the queries of a `GET` share it. Only samples of GraphQL paths pay for it: the record
    /// path reads ``urlText`` as for any sample.
    package mutating func setGraphQLOperation(_ segment: String) {
        let text = urlText
        if parsedURL == nil { parsedURL = URL(string: text) }
        graphQLOperation = segment
        keptText = Self.seriesText(text, operation: segment)
    }

    /// `text` up to its query or fragment, with `#graphql=` and `operation` after it.
    private static func seriesText(_ text: String, operation: String) -> String {
        let end = text.firstIndex { $0 == "?" || $0 == "#" } ?? text.endIndex
        return text[..<end] + "#graphql=" + operation
    }
    /// The part of the service that made the call (a feature, a client, a team).
    public var module: String
    /// When the request started: the point's timestamp.
    public var startedAt: Date
    /// From the start of the request to the end of the response body (or the error).
    public var duration: Duration
    /// From the start of the request to the response head.
    public var timeToFirstByte: Duration?
    /// DNS lookup, TCP connect and TLS handshake, where the platform reports them.
    public var domainLookup: Duration?
    /// The TCP connect, where the platform reports it.
    public var connect: Duration?
    /// The TLS handshake, where the platform reports it.
    public var secureConnection: Duration?
    /// The HTTP status, `nil` for a transport failure.
    public var statusCode: Int?
    /// The transport failure (timeout, refused connection, cancellation…), if any.
    public var error: TransportError?
    /// Request body bytes sent.
    public var requestBytes: UInt64
    /// Response body bytes received.
    public var responseBytes: UInt64
    /// Redirects followed, where the platform reports them (`nil` where it does not: Linux).
    public var redirectCount: Int?
    /// The request's or response's correlation id (never a tag: it is unique per request).
    public var correlationID: String?
    /// `http/1.1`, `h2`, `h3` where the platform reports it.
    public var networkProtocol: String?
    /// Whether the connection was reused, where the platform reports it.
    public var reusedConnection: Bool?

    /// A sample of one request; the properties not taken here (DNS, connect and TLS phases, protocol,
    /// connection reuse) can be set afterwards.
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - url: The request's URL (only its scheme, host, port and path are recorded).
    ///   - module: The part of the service that made the call.
    ///   - startedAt: When the request started.
    ///   - duration: From the start to the end of the response body, or the error.
    ///   - statusCode: The HTTP status, `nil` for a transport failure.
    ///   - error: The transport failure, if any.
    ///   - requestBytes: Request body bytes sent.
    ///   - responseBytes: Response body bytes received.
    ///   - timeToFirstByte: From the start to the response head, if known.
    ///   - redirectCount: Redirects followed; `nil` where they cannot be seen.
    ///   - correlationID: The request's or response's correlation id, if any.
    @inlinable
    public init(
        method: String,
        url: URL,
        module: String,
        startedAt: Date,
        duration: Duration,
        statusCode: Int? = nil,
        error: TransportError? = nil,
        requestBytes: UInt64 = 0,
        responseBytes: UInt64 = 0,
        timeToFirstByte: Duration? = nil,
        redirectCount: Int? = 0,
        correlationID: String? = nil
    ) {
        self.init(
            method: method,
            parsedURL: url,
            keptText: nil,
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

    /// A sample whose URL is `parsedURL`, or `keptText` (see ``URLText``) when it is `nil`.
    @usableFromInline
    init(
        method: String,
        parsedURL: URL?,
        keptText: String?,
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
        self.method = method
        self.parsedURL = parsedURL
        self.keptText = keptText
        self.module = module
        self.startedAt = startedAt
        self.duration = duration
        self.statusCode = statusCode
        self.error = error
        self.requestBytes = requestBytes
        self.responseBytes = responseBytes
        self.timeToFirstByte = timeToFirstByte
        self.redirectCount = redirectCount
        self.correlationID = correlationID
    }

    /// A transport failure as its error domain and code (`NSURLErrorDomain -1001` is a timeout).
    public struct TransportError: Sendable, Hashable, CustomStringConvertible {
        /// The error domain (`NSURLErrorDomain` for URLSession and AsyncHTTPClient capture alike).
        public var domain: String
        /// The code within the domain (−1001 a timeout, −1004 a refused connection, −999 cancelled).
        public var code: Int

        /// A transport error with the given domain and code.
        ///
        /// - Parameters:
        ///   - domain: The error domain.
        ///   - code: The code within the domain.
        public init(domain: String, code: Int) {
            self.domain = domain
            self.code = code
        }

        /// The domain and code of `error`, as `NSError` bridges it.
        ///
        /// - Parameter error: What the request failed with.
        public init(_ error: any Error) {
            let nsError = error as NSError
            self.init(domain: nsError.domain, code: nsError.code)
        }

        public var description: String { "\(domain) \(code)" }
    }
}

/// Why a response body could not be decoded.
public enum ParseFailureKind: String, Sendable, Hashable, CaseIterable {
    /// A key the type needs is missing (`DecodingError.keyNotFound`).
    case keyNotFound
    /// A value has another type than expected (`DecodingError.typeMismatch`).
    case typeMismatch
    /// A value the type needs is `null` (`DecodingError.valueNotFound`).
    case valueNotFound
    /// The JSON is invalid or cut off before its end (`DecodingError.dataCorrupted`).
    case dataCorrupted
    /// The body is not JSON at all (a JSON document cut off before its end is ``dataCorrupted``).
    case notJSON
    /// Any other decoding error.
    case other

    /// The kind of a `DecodingError` (or any other error), and its coding path as `a.b[2].c`.
    package static func classify(_ error: any Error, data: Data? = nil) -> (kind: ParseFailureKind, codingPath: String)
    {
        guard let decodingError = error as? DecodingError else { return (.other, "") }
        func path(_ keys: [any CodingKey]) -> String {
            keys.reduce(into: "") { result, key in
                if let index = key.intValue {
                    result += "[\(index)]"
                } else {
                    result += result.isEmpty ? key.stringValue : "." + key.stringValue
                }
            }
        }
        switch decodingError {
        case .keyNotFound(let key, let context): return (.keyNotFound, path(context.codingPath + [key]))
        case .typeMismatch(_, let context): return (.typeMismatch, path(context.codingPath))
        case .valueNotFound(_, let context): return (.valueNotFound, path(context.codingPath))
        case .dataCorrupted(let context):
            // A document cut off before its end is JSON whose data is corrupted, not a body that is not JSON.
            if context.codingPath.isEmpty, let data,
                (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) == nil,
                !JSONPrefix.isCutOff(Array(data))
            {
                return (.notJSON, "")
            }
            return (.dataCorrupted, path(context.codingPath))
        @unknown default: return (.other, "")
        }
    }
}
