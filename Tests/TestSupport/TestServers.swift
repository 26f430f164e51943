import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real servers `scripts/test` starts on loopback, found through the environment.
public enum TestServers {
    public struct Missing: Error, CustomStringConvertible {
        public var variable: String
        public var description: String {
            "\(variable) is not set: run the suite with scripts/test, which starts the real servers"
        }
    }

    /// InfluxDB 1.x (`/write`, `/query`).
    public static func influxDB1() throws -> URL { try url("APIHEALTH_TEST_INFLUXDB1_URL") }

    /// VictoriaMetrics (`/api/v2/write`, `/api/v1/export`).
    public static func victoriaMetrics() throws -> URL { try url("APIHEALTH_TEST_VICTORIA_URL") }

    private static func url(_ variable: String) throws -> URL {
        guard let text = ProcessInfo.processInfo.environment[variable], let url = URL(string: text) else {
            throw Missing(variable: variable)
        }
        return url
    }
}

/// A plain HTTP exchange on an uninstrumented ephemeral session.
public enum HTTP {
    public static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        return URLSession(configuration: configuration)
    }()

    public struct Reply: Sendable {
        public var status: Int
        public var body: Data
        public var headers: [String: String]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public static func send(
        _ method: String,
        _ url: URL,
        body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> Reply {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var replyHeaders: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            replyHeaders[String(describing: name).lowercased()] = String(describing: value)
        }
        return Reply(status: http.statusCode, body: data, headers: replyHeaders)
    }

    public static func url(_ base: URL, _ path: String, _ query: [(String, String)] = []) -> URL {
        var components = URLComponents(url: base, resolvingAgainstBaseURL: false)!
        components.path = path
        if !query.isEmpty {
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
            // '+' is a space to form decoders; encode it so InfluxQL sees a plus sign.
            components.percentEncodedQuery = components.percentEncodedQuery?
                .replacingOccurrences(of: "+", with: "%2B")
        }
        return components.url!
    }
}

/// A failed exchange with a test server, with what it said.
public struct TestFailure: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
