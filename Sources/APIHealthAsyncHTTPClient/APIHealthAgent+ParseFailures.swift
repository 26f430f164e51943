import APIHealth
import AsyncHTTPClient
import Foundation
import NIOCore

extension APIHealthAgent {
    /// Records that the response to an AsyncHTTPClient request could not be decoded, as a point of the
    /// parse-failure measurement (tagged like the request's own point).
    ///
    /// ```swift
    /// let body = try await response.body.collect(upTo: 1 << 20)
    /// do {
    ///     user = try JSONDecoder().decode(User.self, from: Data(body.readableBytesView))
    /// } catch {
    ///     agent.recordParseFailure(for: request, response: response, error: error, module: "accounts", body: body)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request that was sent.
    ///   - response: Its response, if one came.
    ///   - error: What decoding threw (a `DecodingError` gives the kind and coding path).
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - body: The body that failed to decode: tells a document cut short from one that is not JSON.
    public func recordParseFailure(
        for request: HTTPClientRequest,
        response: HTTPClientResponse?,
        error: any Error,
        module: String,
        body: ByteBuffer? = nil
    ) {
        recordParseFailure(of: request, response, error, module, data: body.map { Data($0.readableBytesView) })
    }

    /// Decodes the JSON in `body`; when that fails, records a parse failure for the request's endpoint
    /// and rethrows.
    ///
    /// ```swift
    /// let response = try await httpClient.execute(request, timeout: .seconds(10), recordingTo: agent, module: "accounts")
    /// let body = try await response.body.collect(upTo: 1 << 20)
    /// let user = try agent.decode(User.self, from: body, for: request, response: response, module: "accounts")
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - body: The response body.
    ///   - request: The request that was sent.
    ///   - response: Its response.
    ///   - module: The part of the service that made the call (the `module` tag).
    ///   - decoder: The decoder to use.
    /// - Returns: The decoded value.
    /// - Throws: What `decoder` throws, after recording it.
    public func decode<T: Decodable>(
        _ type: T.Type,
        from body: ByteBuffer,
        for request: HTTPClientRequest,
        response: HTTPClientResponse?,
        module: String,
        decoder: JSONDecoder = JSONDecoder()
    ) throws -> T {
        let data = Data(body.readableBytesView)
        do {
            return try decoder.decode(type, from: data)
        } catch {
            recordParseFailure(of: request, response, error, module, data: data)
            throw error
        }
    }

    /// The parse failure of `request`, when the agent records and its URL has a host.
    private func recordParseFailure(
        of request: HTTPClientRequest,
        _ response: HTTPClientResponse?,
        _ error: any Error,
        _ module: String,
        data: Data?
    ) {
        guard configuration.isEnabled, let url = URLText.url(request.url) else { return }
        recordParseFailure(
            method: request.method.rawValue,
            url: url,
            statusCode: response.map { Int($0.status.code) },
            error: error,
            module: module,
            data: data
        )
    }
}
