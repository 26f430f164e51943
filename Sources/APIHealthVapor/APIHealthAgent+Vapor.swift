import APIHealth
import Foundation
import Vapor

extension APIHealthAgent {
    /// Decodes a Vapor client response's content (as `response.content.decode(_:)` does, by its content
    /// type); when that fails, records a parse failure for the request's endpoint and rethrows.
    ///
    /// ```swift
    /// let response = try await req.client.get(url)
    /// let charge = try agent.decode(Charge.self, from: response, url: url, module: "payments")
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - response: The response whose content to decode.
    ///   - method: The request's method.
    ///   - url: The request's URL (its host and path name the endpoint).
    ///   - module: The part of the service that made the call (the `module` tag).
    /// - Returns: The decoded value.
    /// - Throws: What decoding throws (a `DecodingError`, or Vapor's `Abort` for a missing body or an
    ///   unknown content type), after recording it.
    public func decode<T: Decodable>(
        _ type: T.Type,
        from response: ClientResponse,
        method: HTTPMethod = .GET,
        url: URI,
        module: String
    ) throws -> T {
        do {
            return try response.content.decode(type)
        } catch {
            recordParseFailure(for: response, method: method, url: url, error: error, module: module)
            throw error
        }
    }

    /// Records that a Vapor client response could not be decoded, as a point of the parse-failure
    /// measurement (tagged like the request's own point).
    ///
    /// ```swift
    /// agent.recordParseFailure(for: response, method: .POST, url: url, error: error, module: "payments")
    /// ```
    ///
    /// - Parameters:
    ///   - response: The response that could not be decoded (its status and body are recorded).
    ///   - method: The request's method.
    ///   - url: The request's URL.
    ///   - error: What decoding threw (a `DecodingError` gives the kind and coding path).
    ///   - module: The part of the service that made the call (the `module` tag).
    public func recordParseFailure(
        for response: ClientResponse,
        method: HTTPMethod = .GET,
        url: URI,
        error: any Error,
        module: String
    ) {
        guard configuration.isEnabled, let parsed = URL(string: url.string), parsed.host != nil else { return }
        recordParseFailure(
            method: method.rawValue,
            url: parsed,
            statusCode: Int(response.status.code),
            error: error,
            module: module,
            data: response.body.map { Data($0.readableBytesView) }
        )
    }
}
