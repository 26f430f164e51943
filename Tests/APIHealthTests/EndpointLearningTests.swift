import Foundation
import TestSupport
import Testing

@testable import APIHealth

private let words = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
    "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
    "xray", "yankee", "zulu", "shoes", "boots", "shirt", "jacket", "red", "blue",
]

/// Unique URLs of eight common shapes: integers, UUIDs, hex digests, e-mails, query strings, two kinds
/// of slug, and 22-character base64 tokens without a digit.
private func shapedPath(_ index: Int, _ random: inout SeededGenerator) -> String {
    func word() -> String { words[Int(random.next() % UInt64(words.count))] }
    func letters(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_")
        return String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }
    switch index % 8 {
    case 0: return "/users/\(index)"
    case 1: return "/orders/\(UUID().uuidString.lowercased())/items"
    case 2: return "/blobs/" + String(format: "%016llx%016llx", random.next(), random.next())
    case 3: return "/people/\(word()).\(index)@example.com/avatar"
    case 4: return "/search?q=\(word())\(index)"
    case 5: return "/s/\(word())-\(word())-\(index)"
    case 6: return "/p/\(word())-shoes-\(index % 9_973)"
    default: return "/t/" + letters(22)
    }
}

/// Twenty endpoints a real service calls again and again.
private let fixedEndpoints = [
    "/health", "/api/v1/me", "/api/v1/config", "/api/v1/users/me/settings", "/api/v1/cart", "/api/v1/cart/items",
    "/api/v1/checkout", "/api/v1/catalog/featured", "/api/v1/catalog/categories", "/api/v2/search", "/api/v2/recommendations",
    "/auth/token", "/auth/refresh", "/auth/logout", "/billing/invoices", "/billing/methods", "/status", "/metrics",
    "/v3/feed", "/v3/notifications",
]

@Suite struct EndpointLearningTests {
    private func schema(threshold: Int = 20, cap: Int = 500) -> RequestSchema {
        var configuration = APIHealthConfiguration(serviceName: "learning")
        configuration.capture.learningThreshold = threshold
        configuration.capture.maximumDistinctPaths = cap
        return RequestSchema(configuration: configuration)
    }

    private func tag(_ schema: RequestSchema, _ path: String, method: String = "GET") -> String {
        schema.pathTag(host: "api.example.com", method: method, url: URL(string: "https://api.example.com" + path)!)
    }

    @Test func learnsEndpointsFromAHundredThousandUniqueURLs() {
        let schema = schema()
        var random = SeededGenerator(state: 42)
        var shaped: [String] = []
        var tags: Set<String> = []
        for index in 0..<100_000 {
            let path = shapedPath(index, &random)
            shaped.append(path)
            tags.insert(tag(schema, path))
            if index % 5_000 == 0 {
                for endpoint in fixedEndpoints { tags.insert(tag(schema, endpoint)) }
            }
        }
        #expect(!tags.contains("{overflow}"), "nothing went past the cap")
        #expect(schema.pathsOverflowed == 0)
        for endpoint in fixedEndpoints {
            #expect(tag(schema, endpoint) == endpoint, "a fixed endpoint keeps its own template")
        }
        let shapeTemplates = Set(shaped.map { tag(schema, $0) })
        #expect(shapeTemplates.count <= 16, "\(shapeTemplates.sorted())")
        #expect(shapeTemplates.isDisjoint(with: fixedEndpoints))
        #expect(shapeTemplates.contains("/s/{slug}"))
        #expect(shapeTemplates.contains("/p/{slug}"))
        #expect(shapeTemplates.contains("/users/{id}"))
    }

    @Test func aNewEndpointAfterTheCapStillGetsItsOwnTemplate() {
        // A small cap, filled by the literal values of shapes that are then learned.
        let schema = schema(threshold: 20, cap: 30)
        for index in 0..<200 {
            _ = tag(schema, "/s/word-\(index)-x")
            _ = tag(schema, "/p/item-\(index)-y")
        }
        #expect(schema.pathsOverflowed > 0, "the cap was reached on the way")
        #expect(tag(schema, "/s/word-9999-x") == "/s/{slug}")
        #expect(tag(schema, "/api/v9/brand-new") == "/api/v9/brand-new")
        #expect(tag(schema, "/api/v9/another") == "/api/v9/another")
    }

    @Test func aLearnedTemplateNeverChangesAgain() {
        let schema = schema(threshold: 5)
        for index in 0..<6 { _ = tag(schema, "/s/a-\(index)") }
        let learned = tag(schema, "/s/a-0")
        #expect(learned == "/s/{slug}")
        for index in 0..<10_000 { _ = tag(schema, "/s/other-\(index)/x\(index % 50)") }
        #expect(tag(schema, "/s/a-0") == learned, "the same URL keeps its template")
    }

    @Test func caseVariantsAreOneEndpoint() {
        let schema = schema()
        #expect(tag(schema, "/Items/ABC/Details") == tag(schema, "/items/abc/details"))
    }

    @Test func learningIsPerMethod() {
        let schema = schema(threshold: 3)
        for index in 0..<4 { _ = tag(schema, "/s/a-\(index)", method: "POST") }
        #expect(tag(schema, "/s/a-0", method: "POST") == "/s/{slug}")
        #expect(tag(schema, "/s/a-0", method: "GET") == "/s/a-0")
    }

    @Test func userRulesStillWin() {
        var configuration = APIHealthConfiguration(serviceName: "learning")
        configuration.capture.pathRules = ["/s/*/reviews"]
        configuration.capture.learningThreshold = 2
        let schema = RequestSchema(configuration: configuration)
        for index in 0..<10 { _ = tag(schema, "/s/a-\(index)") }
        #expect(tag(schema, "/s/a-1/reviews") == "/s/*/reviews")
    }
}
