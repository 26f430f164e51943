/// What a transport error failed at, as the interval points count it (``PointSchema/transportErrorIntervalFields``)
/// and the reachability alerts name it: the host's name not found, no connection, the TLS handshake or the
/// server's certificate refused, or no answer in time. Other errors (a cancelled request, a bad URL) are of
/// no kind.
///
/// ```swift
/// TransportErrorKind(RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1004))   // .connect
/// ```
enum TransportErrorKind: UInt8, Sendable, CaseIterable {
    case dns, connect, tls, timeout

    /// The kind of `error` by its `NSURLErrorDomain` code (URLSession's own; AsyncHTTPClient capture maps its
    /// errors to the same codes); `nil` for another domain or code.
    init?(_ error: RequestSample.TransportError?) {
        guard let error, error.domain == "NSURLErrorDomain" else { return nil }
        switch error.code {
        // cannotFindHost, dnsLookupFailed
        case -1003, -1006: self = .dns
        // cannotConnectToHost, networkConnectionLost, notConnectedToInternet, internationalRoamingOff,
        // dataNotAllowed
        case -1004, -1005, -1009, -1018, -1020: self = .connect
        // secureConnectionFailed, the server certificate's errors, client certificate rejected or required
        case -1206 ... -1200: self = .tls
        // timedOut
        case -1001: self = .timeout
        default: return nil
        }
    }

    /// The interval field counting errors of this kind.
    var fieldName: String {
        typealias F = PointSchema.IntervalField
        switch self {
        case .dns: return F.dnsErrors
        case .connect: return F.connectErrors
        case .tls: return F.tlsErrors
        case .timeout: return F.timeoutErrors
        }
    }
}

/// Whether a request failed, and how, as its interval aggregate counts it (one byte, so the record path
/// passes it as cheaply as a `Bool`).
///
/// ```swift
/// RequestSchema.failure(sample, series: series)   // .none, .failed or .transport(.connect)
/// ```
enum RequestFailure: Equatable {
    /// It succeeded.
    case none
    /// A status its series does not count as a success, or a transport error of no known kind.
    case failed
    /// A transport error of a known kind.
    case transport(TransportErrorKind)

    /// Whether it failed at all.
    @inline(__always)
    var isFailure: Bool {
        if case .none = self { return false }
        return true
    }
}
