import Foundation
import LineProtocol
import Logging
import ServiceLifecycle

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIHealthAgent {
    /// Records that a response could not be decoded, as a point of the parse-failure measurement.
    ///
    /// ```swift
    /// agent.recordParseFailure(for: request, response: response, error: error, module: "feed")
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request whose response it was (its URL and method name the endpoint).
    ///   - response: The response, for its status code and, when the request has none, its URL.
    ///   - error: What decoding threw; a `DecodingError` gives the ``ParseFailureKind`` and coding path.
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - data: The body, which tells a cut-off JSON document (``ParseFailureKind/dataCorrupted``) from a
    ///     body that is not JSON (``ParseFailureKind/notJSON``).
    public func recordParseFailure(
        for request: URLRequest,
        response: URLResponse?,
        error: any Error,
        module: String,
        data: Data? = nil
    ) {
        guard let url = request.url ?? response?.url else { return }
        recordParseFailure(
            method: request.httpMethod ?? "GET",
            url: url,
            statusCode: (response as? HTTPURLResponse)?.statusCode,
            error: error,
            module: module,
            data: data
        )
    }

    /// Records that the response of a request made with any HTTP client could not be decoded, as a point
    /// of the parse-failure measurement (tagged with the templated path, as the request's own point is).
    ///
    /// ```swift
    /// agent.recordParseFailure(method: "GET", url: url, statusCode: 200, error: error, module: "feed", data: body)
    /// ```
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - url: The request's URL (only its host and path are used).
    ///   - statusCode: The response's status, `nil` if there was none.
    ///   - error: What decoding threw (a `DecodingError` gives the kind and coding path).
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - data: The body that failed to decode: tells a document cut short from one that is not JSON.
    public func recordParseFailure(
        method: String,
        url: URL,
        statusCode: Int?,
        error: any Error,
        module: String,
        data: Data? = nil
    ) {
        guard configuration.isEnabled else { return }
        let (kind, codingPath) = ParseFailureKind.classify(error, data: data)
        let report = ParseFailureReport(
            url: url,
            method: method,
            module: module,
            statusCode: statusCode,
            kind: kind,
            codingPath: codingPath,
            at: now
        )
        if !recorder.recordLater(now: clock.coarseNow, .parseFailure(report)) { lossReporter.noticeIfStopped(pending) }
    }

    /// Decodes `data`; when that fails, records a parse failure for the endpoint and rethrows.
    ///
    /// ```swift
    /// let (data, response) = try await session.data(for: request)
    /// let user = try agent.decode(User.self, from: data, for: request, response: response, module: "accounts")
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: The response body.
    ///   - request: The request whose response it is.
    ///   - response: The response.
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - decoder: The decoder to use.
    /// - Returns: The decoded value.
    /// - Throws: Whatever `decoder` throws, after recording it.
    public func decode<T: Decodable>(
        _ type: T.Type,
        from data: Data,
        for request: URLRequest,
        response: URLResponse?,
        module: String,
        decoder: JSONDecoder = JSONDecoder()
    ) throws -> T {
        do {
            return try decoder.decode(type, from: data)
        } catch {
            recordParseFailure(for: request, response: response, error: error, module: module, data: data)
            throw error
        }
    }
}
