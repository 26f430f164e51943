import TestSupport
import Testing

@testable import APIHealth

@Suite struct PathTemplaterTests {
    @Test(arguments: [
        ("/users/8271/orders/9f3a4b2c1d0e5f6a7b8c", "/users/{id}/orders/{hex}"),
        ("/v1/items/550e8400-e29b-41d4-a716-446655440000", "/v1/items/{uuid}"),
        ("/people/ada.lovelace@example.com/avatar", "/people/{email}/avatar"),
        ("/reset/eyJhbGciOiJIUzI1NiJ9abc123", "/reset/{token}"),
        ("/orders/ord-123456", "/orders/{id}"),
        ("/reports/2024-05-17/summary", "/reports/{date}/summary"),
        ("/events/2024-05-17T08:30:00Z", "/events/{date}"),
        ("/products/red-running-shoes-1234", "/products/{slug}"),
        ("/sessions/qZk_PvXwLmTnBcYdRsFgHj", "/sessions/{token}"),
        ("/api/getUserProfileSettings", "/api/getUserProfileSettings"),
        ("/reports/top-ten", "/reports/top-ten"),
        ("/health", "/health"),
        ("/", "/"),
        ("", "/"),
        ("/api/v2/write", "/api/v2/write"),
    ])
    func automaticRulesReplaceIdentifiers(path: String, template: String) {
        #expect(PathTemplater().template(host: "api.example.com", path: path) == template)
    }

    /// Words and numbers are told apart without reading a segment's whole shape: the quick reading must
    /// agree with the whole one on every segment.
    @Test func theQuickReadingOfWordsAndNumbersIsTheWholeOne() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        let pieces = ["a", "f", "z", "Q", "F", "0", "7", "9", "-", "_", ".", "@", "%", "~", "é", "users", "v2", "2024"]
        for _ in 0..<RandomCases.count(100_000) {
            let segment = (0..<Int.random(in: 0...20, using: &random)).map { _ in
                Int.random(in: 0..<3, using: &random) == 0
                    ? pieces.randomElement(using: &random)! : String(pieces.prefix(8).randomElement(using: &random)!)
            }
            .joined()
            let quick = PathTemplater.placeholder(for: segment[...])
            let whole = PathTemplater.placeholderByShape(for: segment[...])
            guard quick == whole else {
                Issue.record(
                    "seed \(seed): \(segment.debugDescription) reads \(String(describing: quick)), whole \(String(describing: whole))"
                )
                return
            }
        }
    }

    @Test func userRulesWinOverAutomaticOnes() {
        let templater = PathTemplater(rules: ["api.example.com/users/*/orders/**", "/static/**", "*/teams/*"])
        #expect(
            templater.template(host: "api.example.com", path: "/users/8271/orders/9f3a/items") == "/users/*/orders/**"
        )
        #expect(templater.template(host: "api.example.com:8443", path: "/users/ada/orders") == "/users/*/orders/**")
        #expect(templater.template(host: "other.com", path: "/users/8271/orders/1") == "/users/{id}/orders/{id}")
        #expect(templater.template(host: "cdn.com", path: "/static/js/app.123.js") == "/static/**")
        #expect(templater.template(host: "x.com", path: "/teams/blue") == "/teams/*")
    }
}
