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
    public var method: String
    public var url: URL
    /// The part of the service that made the call (a feature, a client, a team).
    public var module: String
    public var startedAt: Date
    /// From the start of the request to the end of the response body (or the error).
    public var duration: Duration
    /// From the start of the request to the response head.
    public var timeToFirstByte: Duration?
    /// DNS lookup, TCP connect and TLS handshake, where the platform reports them.
    public var domainLookup: Duration?
    public var connect: Duration?
    public var secureConnection: Duration?
    /// The HTTP status, `nil` for a transport failure.
    public var statusCode: Int?
    /// The transport failure (timeout, refused connection, cancellation…), if any.
    public var error: TransportError?
    public var requestBytes: UInt64
    public var responseBytes: UInt64
    /// Redirects followed, where the platform reports them (`nil` where it does not: Linux).
    public var redirectCount: Int?
    /// The request's or response's correlation id (never a tag: it is unique per request).
    public var correlationID: String?
    /// `http/1.1`, `h2`, `h3` where the platform reports it.
    public var networkProtocol: String?
    public var reusedConnection: Bool?

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
        self.method = method
        self.url = url
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
        public var domain: String
        public var code: Int

        public init(domain: String, code: Int) {
            self.domain = domain
            self.code = code
        }

        public init(_ error: any Error) {
            let nsError = error as NSError
            self.init(domain: nsError.domain, code: nsError.code)
        }

        public var description: String { "\(domain) \(code)" }
    }
}

/// Why a response body could not be decoded.
public enum ParseFailureKind: String, Sendable, Hashable, CaseIterable {
    case keyNotFound
    case typeMismatch
    case valueNotFound
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
