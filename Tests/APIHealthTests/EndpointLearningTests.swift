import Foundation
import LineProtocol
import Logging
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

/// The `index`th of 100,000 unique URLs of eight shapes a real API is called with, and the one
/// template each shape must be written as: numeric ids, UUIDs (either case), a nested resource with
/// prefixed ids (`in_…`, base62: some without a digit), product slugs ending in a number, blog slugs of
/// words only (which nothing but learning recognises), session tokens (base64url: some without a digit),
/// content hashes, and a health check (unique only by its query, which is never recorded).
private func realisticRequest(_ index: Int, _ random: inout SeededGenerator) -> (url: String, template: String) {
    func pick(_ alphabet: [Character], _ count: Int) -> String {
        String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }
    let digits = Array("0123456789")
    let lower = Array("abcdefghijklmnopqrstuvwxyz")
    let upper = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    let hex = Array("0123456789abcdef")
    let serial = index / 8
    switch index % 8 {
    case 0:
        return ("/users/\(100_000 + serial * 7)", "/users/{id}")
    case 1:
        var uuid = [pick(hex, 8), pick(hex, 4), "4" + pick(hex, 3), pick(hex, 4), pick(hex, 12)].joined(separator: "-")
        if serial % 2 == 0 { uuid = uuid.uppercased() }
        return ("/orders/\(uuid)/items", "/orders/{uuid}/items")
    case 2:
        let invoice = "in_" + pick(digits + lower + upper, 24)
        return ("/api/v2/accounts/\(serial % 5_000 + 1)/invoices/\(invoice)", "/api/v2/accounts/{id}/invoices/{token}")
    case 3:
        let name = [words[serial % words.count], words[(serial / 7) % words.count], "shoes"].joined(separator: "-")
        return ("/products/\(name)-\(serial)", "/products/{slug}")
    case 4:
        let title = [serial % 32, (serial / 32) % 32, (serial / 1_024) % 32, Int(random.next() % 32)]
            .map { words[$0] }.joined(separator: "-")
        return ("/blog/\(title)", "/blog/{slug}")
    case 5:
        return ("/sessions/" + pick(digits + lower + upper + ["-", "_"], 22), "/sessions/{token}")
    case 6:
        return ("/files/\(pick(hex, 40))/download", "/files/{hex}/download")
    default:
        return ("/health?probe=\(serial)", "/health")
    }
}

/// `index` in lowercase letters, base 26 (`a`, `b`, … `z`, `ba`, …): unique values without a digit.
private func letters(_ index: Int) -> String {
    var rest = index
    var result = ""
    repeat {
        result = String(UnicodeScalar(UInt8(97 + rest % 26))) + result
        rest /= 26
    } while rest > 0
    return result
}

/// Twenty endpoints a real service calls again and again.
private let fixedEndpoints = [
    "/health", "/api/v1/me", "/api/v1/config", "/api/v1/users/me/settings", "/api/v1/cart", "/api/v1/cart/items",
    "/api/v1/checkout", "/api/v1/catalog/featured", "/api/v1/catalog/categories", "/api/v2/search",
    "/api/v2/recommendations",
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

    @Test func oneTemplatePerEndpointFromTheFirstRequestOfAHundredThousandUniqueURLs() async throws {
        var configuration = APIHealthConfiguration(serviceName: "learning")
        configuration.spool = nil
        configuration.precision = .ns
        // A point for every request: each one's path tag is read.
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "learning"))
        // Long and synchronous: off the concurrency pool, which other tests' agents need meanwhile.
        let (templates, points) = try await onOwnThread { () -> ([String], [Point]) in
            var random = SeededGenerator(state: 27)
            var templates: [String] = []
            let started = Date(timeIntervalSince1970: 1_700_000_000)
            for index in 0..<100_000 {
                let (url, template) = realisticRequest(index, &random)
                templates.append(template)
                agent.record(
                    RequestSample(
                        method: "GET",
                        url: URL(string: "https://api.example.com" + url)!,
                        module: "shop",
                        startedAt: started.addingTimeInterval(Double(index) / 1_000),
                        duration: .milliseconds(3),
                        statusCode: 200
                    )
                )
            }
            return (templates, agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request })
        }
        #expect(points.count == 100_000)
        let written = points.map { $0.tag("path") ?? "" }
        let distinct = Set(written)
        #expect(distinct.count <= 16, "\(distinct.count) distinct path tags: \(distinct.sorted())")

        // Never two parameter names at one position under one prefix.
        var names: [String: Set<String>] = [:]
        for tag in distinct where tag.hasPrefix("/") {
            let segments = tag.split(separator: "/")
            for (position, segment) in segments.enumerated() where segment.hasPrefix("{") {
                names["/" + segments[..<position].joined(separator: "/"), default: []].insert(String(segment))
            }
        }
        let conflicts = names.filter { $0.value.count > 1 }
        #expect(conflicts.isEmpty, "positions with two names: \(conflicts)")

        // Each request is written as its shape's template, or as `{new}` while a segment of it has not
        // been seen before and does not look like an identifier: never as a literal value, never as
        // another template. The blog, whose words only learning recognises, is learned within its
        // first 30 requests; the rest is a few first sightings.
        let held = written.indices.filter { written[$0] == EndpointLearner.newPath }
        for (index, tag) in written.enumerated() where tag != templates[index] && tag != EndpointLearner.newPath {
            Issue.record("request \(index) written as \(tag), not \(templates[index])")
            break
        }
        let blog = written.indices.filter { templates[$0] == "/blog/{slug}" }
        #expect(blog.prefix(30).last.map { written[$0] } == "/blog/{slug}")
        #expect(held.count <= 40, "\(held.count) held back: \(held.prefix(50).map { templates[$0] })")
    }

    @Test func aNewEndpointAfterTheCapStillGetsItsOwnTemplate() {
        // A small cap, filled by the literal values of positions that are then learned: each value is
        // seen twice, so it is written as itself (a value seen once is held back as new).
        let schema = schema(threshold: 20, cap: 30)
        for index in 0..<200 {
            for _ in 0..<2 {
                _ = tag(schema, "/s/word-\(letters(index))")
                _ = tag(schema, "/p/item-\(letters(index))")
            }
        }
        #expect(schema.pathsOverflowed > 0, "the cap was reached on the way")
        #expect(tag(schema, "/s/word-zzz") == "/s/{slug}")
        #expect(tag(schema, "/api/v9/brand-new") == "/api/v9/brand-new")
        #expect(tag(schema, "/api/v9/another") == "/api/v9/another")
    }

    @Test func aTemplateReleasedByLearningCountsUnderTheCapAgain() {
        // `/x/a` is in use for POST and GET; GET's `/x` position is learned, which releases the
        // templates of its literal values, `/x/a` among them. A POST to `/x/a` then takes its place
        // under the cap again, so the cap of 3 (`/x/{token}`, `/x/a`, `/z/q`) leaves `/w/r` out.
        let schema = schema(threshold: 3, cap: 3)
        for path in ["/x/a", "/x/a"] { _ = tag(schema, path, method: "POST") }
        for path in ["/x/a", "/x/a", "/x/b", "/x/b", "/x/c", "/x/c"] { _ = tag(schema, path) }
        #expect(tag(schema, "/x/d") == "/x/{token}")
        #expect(tag(schema, "/x/a", method: "POST") == "/x/a")
        for _ in 0..<2 { _ = tag(schema, "/z/q") }
        #expect(tag(schema, "/z/q") == "/z/q")
        #expect(schema.pathsOverflowed == 0)
        for _ in 0..<2 { _ = tag(schema, "/w/r") }
        #expect(tag(schema, "/w/r") == "{overflow}")
        #expect(schema.pathsOverflowed > 0)
    }

    @Test func aLearnedTemplateNeverChangesAgain() {
        let schema = schema(threshold: 5)
        for index in 0..<6 { _ = tag(schema, "/s/a-\(letters(index))") }
        let learned = tag(schema, "/s/a-a")
        #expect(learned == "/s/{slug}")
        for index in 0..<10_000 { _ = tag(schema, "/s/other-\(index)/x\(index % 50)") }
        #expect(tag(schema, "/s/a-a") == learned, "the same URL keeps its template")
    }

    @Test func caseVariantsAreOneEndpoint() {
        let schema = schema()
        #expect(tag(schema, "/Items/ABC/Details") == tag(schema, "/items/abc/details"))
    }

    @Test func learningIsPerMethod() {
        let schema = schema(threshold: 3)
        for name in ["alpha", "bravo", "charlie", "delta"] { _ = tag(schema, "/s/\(name)", method: "POST") }
        #expect(tag(schema, "/s/alpha", method: "POST") == "/s/{token}")
        #expect(tag(schema, "/s/alpha", method: "GET") == "/s/alpha")
    }

    @Test func aPositionHasOneNameWhateverTheShapeOfItsValues() {
        let schema = schema()
        // Short product slugs end in a number; a long one with a token's length stays a slug.
        #expect(tag(schema, "/p/red-shoes-12") == "/p/{slug}")
        #expect(tag(schema, "/p/whiskey-running-shoes-9973") == "/p/{slug}")
        #expect(tag(schema, "/p/8271") == "/p/{slug}")
        // Session tokens, with and without a digit.
        #expect(tag(schema, "/sessions/qZ3_kP0vXw-Lm8TnB2cYd1") == "/sessions/{token}")
        #expect(tag(schema, "/sessions/qZk_PvXwLmTnBcYdRsFgHj") == "/sessions/{token}")
        // A fixed endpoint beside a parameter keeps its own name.
        #expect(tag(schema, "/users/8271") == "/users/{id}")
        #expect(tag(schema, "/users/me") == "/users/me")
        #expect(tag(schema, "/users/550e8400-e29b-41d4-a716-446655440000") == "/users/{id}")
    }

    @Test func valuesOfAPositionStillBeingLearnedAreNeverWrittenAsThemselves() {
        let schema = schema()
        var written: Set<String> = []
        for index in 0..<20 { written.insert(tag(schema, "/blog/how-to-\(letters(index))-bread")) }
        #expect(written == [EndpointLearner.newPath])
        #expect(tag(schema, "/blog/one-more-loaf") == "/blog/{slug}", "learned at the 21st value")
        #expect(tag(schema, "/blog/how-to-a-bread") == "/blog/{slug}")
        // A value seen again before that is a fixed endpoint, written as itself from then on.
        #expect(tag(schema, "/articles/how-to-bake") == EndpointLearner.newPath)
        #expect(tag(schema, "/articles/how-to-bake") == "/articles/how-to-bake")
    }

    @Test(arguments: [
        ("health", true), ("v2", true), ("oauth2", true), ("user-settings", true), ("Index.html", true), ("API", true),
        ("getUser", false), ("how-to-bake-bread", false), ("2fa", false), ("AbCdEfGh", false), ("caf\u{E9}", false),
    ])
    func wordsAreToldFromOtherLiterals(segment: String, isWord: Bool) {
        #expect(EndpointLearner.looksLikeWord(Substring(segment)) == isWord)
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
