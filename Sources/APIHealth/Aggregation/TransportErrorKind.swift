/// What a transport error failed at, as the interval points count it (``PointSchema/transportErrorIntervalFields``)
/// and the reachability alerts name it: the host's name not found, no connection, the TLS handshake or the
/// server's certificate refused, or no answer in time; or, not the API's failures at all, the device offline or
/// not allowed to use the network, and a request its caller cancelled. Other errors (a bad URL) are of no kind.
///
/// ```swift
/// TransportErrorKind(RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1004))   // .connect
/// TransportErrorKind(RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1009))   // .device
/// ```
enum TransportErrorKind: UInt8, Sendable, CaseIterable {
    case dns, connect, tls, timeout
    /// The device has no network, or may not use it: no internet connection (−1009), international roaming off
    /// (−1018), data not allowed (−1020). The request never left the phone: not a failure of the API.
    case device
    /// The caller cancelled the request (−999): not a failure of the API either.
    case cancelled

    /// The kind of `error` by its `NSURLErrorDomain` code (URLSession's own; AsyncHTTPClient capture maps its
    /// errors to the same codes); `nil` for another domain or code.
    init?(_ error: RequestSample.TransportError?) {
        guard let error, error.domain == "NSURLErrorDomain" else { return nil }
        switch error.code {
        // cannotFindHost, dnsLookupFailed
        case -1003, -1006: self = .dns
        // cannotConnectToHost, networkConnectionLost
        case -1004, -1005: self = .connect
        // notConnectedToInternet, internationalRoamingOff, dataNotAllowed (Apple platforms; the AsyncHTTPClient
        // capture reports a network that is down or unreachable from this machine as notConnectedToInternet;
        // URLSession on Linux reports the API-side codes only)
        case -1009, -1018, -1020: self = .device
        // cancelled
        case -999: self = .cancelled
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
        case .device: return F.deviceErrors
        case .cancelled: return F.cancelled
        }
    }

    /// Whether it is a failure of the API: counted in `count` and `errors`, and so in availability, burn rates and
    /// reachability. The device's own failures and cancellations are counted apart, in their own fields only.
    var isTheAPIs: Bool {
        switch self {
        case .dns, .connect, .tls, .timeout: return true
        case .device, .cancelled: return false
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
    /// A transport error of a known kind (the device's own and cancellations included: see
    /// ``TransportErrorKind/isTheAPIs``).
    case transport(TransportErrorKind)

    /// Whether it failed at all.
    @inline(__always)
    var isFailure: Bool {
        if case .none = self { return false }
        return true
    }
}
