import APIHealthTestKit
import Foundation

/// The local API the demo calls: a few endpoints per module, each with its own latency and error rate.
struct DemoEndpoint: Sendable {
    var module: String
    var method: String
    /// The path the client asks for (identifiers filled in per call).
    var makePath: @Sendable (Int) -> String
    var medianMilliseconds: Double
    var errorRate: Double
    var errorStatus: Int
    /// Share of 200 answers whose body is not what the client expects.
    var malformedRate: Double = 0
}

enum DemoAPI {
    static let endpoints: [DemoEndpoint] = [
        DemoEndpoint(
            module: "catalog",
            method: "GET",
            makePath: { "/catalog/products/\(1_000 + $0 % 500)" },
            medianMilliseconds: 18,
            errorRate: 0.01,
            errorStatus: 500
        ),
        DemoEndpoint(
            module: "catalog",
            method: "GET",
            makePath: { _ in "/catalog/search" },
            medianMilliseconds: 45,
            errorRate: 0.03,
            errorStatus: 503
        ),
        DemoEndpoint(
            module: "checkout",
            method: "POST",
            makePath: { _ in "/checkout/orders" },
            medianMilliseconds: 80,
            errorRate: 0.05,
            errorStatus: 500
        ),
        DemoEndpoint(
            module: "checkout",
            method: "GET",
            makePath: { _ in "/checkout/orders/\(UUID().uuidString.lowercased())" },
            medianMilliseconds: 25,
            errorRate: 0.0,
            errorStatus: 500
        ),
        DemoEndpoint(
            module: "accounts",
            method: "GET",
            makePath: { "/accounts/users/\(40_000 + $0 % 900)" },
            medianMilliseconds: 12,
            errorRate: 0.02,
            errorStatus: 404,
            malformedRate: 0.04
        ),
    ]

    /// Answers like a real service would, with a log-normal latency around each endpoint's median.
    static func handle(_ request: LoopbackHTTPServer.Request) async -> LoopbackHTTPServer.Response {
        let path = request.path
        // A finished order redirects to its status page.
        if path.hasPrefix("/checkout/orders/"), !path.hasSuffix("/status") {
            return .text(303, "", headers: [("Location", path + "/status")])
        }
        guard let endpoint = endpoints.first(where: { matches($0, path: path, method: request.method) }) else {
            return .json(404, #"{"error":"no such endpoint"}"#)
        }
        let latency = endpoint.medianMilliseconds * exp(0.5 * gaussian())
        let delay = Duration.microseconds(Int64(latency * 1_000))
        if Double.random(in: 0..<1) < endpoint.errorRate {
            return LoopbackHTTPServer.Response(
                status: endpoint.errorStatus,
                headers: [("Content-Type", "application/json")],
                body: .bytes(Array(#"{"error":"upstream failure"}"#.utf8)),
                delay: delay
            )
        }
        let body: String
        var headers = [("Content-Type", "application/json"), ("X-Request-Id", UUID().uuidString)]
        if Double.random(in: 0..<1) < endpoint.malformedRate {
            body = Bool.random() ? #"{"id":"not-a-number","name":"Ada"}"# : "<html>maintenance</html>"
        } else if path.hasPrefix("/catalog/products/") {
            // The catalogue repeats: a product's answer is the same every time, yet sent as never to be kept
            // (what cache advice is for: `influx-tail --cache`).
            let id = path.split(separator: "/").last.map(String.init) ?? "0"
            body = #"{"id":\#(id),"name":"Product \#(id)","price":\#((Int(id) ?? 0) % 97).99,"items":[1,2,3]}"#
            headers.append(("Cache-Control", "no-store"))
        } else if path == "/catalog/search" {
            // Search results change on every call: nothing a cache could have served.
            body =
                #"{"id":42,"name":"search","results":[\#(Int.random(in: 1..<10_000)),\#(Int.random(in: 1..<10_000))]}"#
            headers.append(("Cache-Control", "no-cache"))
        } else {
            body = #"{"id":42,"name":"Ada","items":[1,2,3]}"#
        }
        return LoopbackHTTPServer.Response(
            status: request.method == "POST" ? 201 : 200,
            headers: headers,
            body: .bytes(Array(body.utf8)),
            delay: delay
        )
    }

    private static func matches(_ endpoint: DemoEndpoint, path: String, method: String) -> Bool {
        guard endpoint.method == method || (method == "GET" && path.hasSuffix("/status")) else { return false }
        let template = endpoint.makePath(0).split(separator: "/").dropLast().joined(separator: "/")
        if path.hasSuffix("/status") { return endpoint.module == "checkout" && endpoint.method == "GET" }
        return path.hasPrefix("/" + template + "/") || path == endpoint.makePath(0)
    }

    private static func gaussian() -> Double {
        let u1 = Double.random(in: Double.ulpOfOne..<1)
        let u2 = Double.random(in: 0..<1)
        return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }
}
