/// One write request as the HTTP server hands it to ``RelayIntake``: what the relay reads of it.
package struct IntakeRequest: Sendable {
    /// The `Authorization` header (`Token <key>` or `Bearer <key>`), if any.
    package var authorization: String?
    /// The `p` query parameter (an InfluxDB 1.x client's password), taken as the key without a header.
    package var password: String?
    /// The `precision` query parameter (`ns`, `us`, `ms`, `s`, and 1.x's `n` and `u`).
    package var precision: String?
    /// The `Content-Encoding` header.
    package var contentEncoding: String?
    /// The client's address: the peer's, or the first of the trusted header's.
    package var client: String
    /// The body as received.
    package var body: [UInt8]

    package init(
        authorization: String? = nil,
        password: String? = nil,
        precision: String? = nil,
        contentEncoding: String? = nil,
        client: String,
        body: [UInt8]
    ) {
        self.authorization = authorization
        self.password = password
        self.precision = precision
        self.contentEncoding = contentEncoding
        self.client = client
        self.body = body
    }

    /// The key the request carries: the `Authorization` header's credential, else the `p` parameter.
    package var key: Substring? {
        if let authorization {
            for scheme in ["Token ", "Bearer "] where authorization.hasPrefix(scheme) {
                let key = authorization.dropFirst(scheme.count).drop { $0 == " " }
                return key.isEmpty ? nil : key
            }
            return nil
        }
        if let password, !password.isEmpty { return Substring(password) }
        return nil
    }
}
