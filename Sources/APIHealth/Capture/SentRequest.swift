import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a ``APIHealthConfiguration/CaptureOptions/filter`` sees of a request besides its sample: the
/// headers it was sent with.
///
/// ```swift
/// configuration.capture.filter = { sample, request in
///     if request.value(forHTTPHeaderField: "X-Synthetic") != nil { return nil }  // not recorded
///     return sample
/// }
/// ```
public struct SentRequest: Sendable {
    private enum Headers: Sendable {
        case none
        case urlRequest(URLRequest)
        case source(any EndedRequestSource)
    }

    private let headers: Headers

    /// A request whose headers are unknown (a sample handed to ``APIHealthAgent/record(_:)``).
    package init() { headers = .none }

    /// The request a URLSession task sent.
    package init(_ request: URLRequest) { headers = .urlRequest(request) }

    /// A request another client's capture observed.
    package init(_ source: any EndedRequestSource) { headers = .source(source) }

    /// The value of the request header `name` (any case), `nil` when the request had none or its
    /// headers are unknown (a sample handed to ``APIHealthAgent/record(_:)``).
    ///
    /// - Parameter name: The header's name, in any case.
    /// - Returns: Its value, or `nil`.
    public func value(forHTTPHeaderField name: String) -> String? {
        switch headers {
        case .none: return nil
        case .urlRequest(let request): return request.value(forHTTPHeaderField: name)
        case .source(let source): return source.requestHeader(name)
        }
    }

    /// The request as URLSession sent it, for URLSession capture; `nil` otherwise.
    public var urlRequest: URLRequest? {
        switch headers {
        case .none: return nil
        case .urlRequest(let request): return request
        case .source(let source): return source.urlRequest
        }
    }
}
