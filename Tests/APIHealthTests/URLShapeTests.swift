import Foundation
import LineProtocol
import TestSupport
import Testing

@testable import APIHealth

/// URLs that differ only in numeric ids or their query find the series rendered for one of them
/// (``URLShape``), and get the very series they would get without it.
@Suite struct URLShapeTests {
    @Test(arguments: [
        ("https://api.example.com/users/8271", "https://api.example.com/users/\0"),
        ("https://api.example.com/users/8271/orders/77?page=2", "https://api.example.com/users/\0/orders/\0"),
        ("http://127.0.0.1:8080/v1/users/100001", "http://127.0.0.1:8080/v1/users/\0"),
        ("https://api.example.com/v2/search?q=42#top", "https://api.example.com/v2/search#top"),
        ("https://api.example.com/users/12/#graphql=GetUser", "https://api.example.com/users/\0/#graphql=GetUser"),
        ("https://api.example.com//7//", "https://api.example.com//\0//"),
        ("https://api.example.com?x=1", "https://api.example.com"),
        // A `?` in the fragment is not a query.
        ("https://api.example.com/users/8271#x?y", "https://api.example.com/users/\0#x?y"),
    ])
    func shapes(url: String, shape: String) {
        #expect(URLShape.string(of: url) == shape)
    }

    @Test(arguments: [
        "https://api.example.com/users/me",
        "https://api.example.com/users/8271a/orders",
        "https://api.example.com/v2",
        "https://12345/",
        "https://api.example.com",
        "https://api.example.com/v1/users/me#section?7",
    ])
    func urlsWithNoIdOrQueryHaveNoShapeApartFromTheirText(url: String) {
        #expect(URLShape.string(of: url) == nil)
    }

    @Test func aURLLongerThanTheBufferHasNoShape() {
        let url = "https://api.example.com/" + String(repeating: "a/", count: 300) + "42"
        #expect(URLShape.string(of: url) == nil)
    }

    private func sample(_ url: String, method: String = "GET", status: Int? = 200) -> RequestSample {
        RequestSample(
            method: method,
            url: URL(string: url)!,
            module: "shapes",
            startedAt: Date(timeIntervalSince1970: 1_700_000_000),
            duration: .milliseconds(5),
            statusCode: status
        )
    }

    private func key(_ schema: RequestSchema, _ sample: RequestSample) throws -> String {
        let (series, _) = try #require(try schema.series(for: sample) { _ in () })
        return String(decoding: series.key.bytes, as: UTF8.self) + " succeeds=\(series.succeeds)"
    }

    /// 30,000 samples of many shapes (ids, slugs, words learned past the threshold, queries, statuses,
    /// methods, a cap of templates reached) through a schema that finds series by shape and one that
    /// cannot (a rule for a host never called names a number): every series is the same, and most
    /// samples of the first were found by their shape.
    @Test func seriesFoundByShapeAreTheSeriesRenderedWithoutIt() throws {
        func configuration(rules: [String]) -> APIHealthConfiguration {
            var configuration = APIHealthConfiguration(serviceName: "shapes")
            configuration.capture.learningThreshold = 8
            configuration.capture.maximumDistinctPaths = 60
            configuration.capture.pathRules = rules
            return configuration
        }
        let shaped = RequestSchema(configuration: configuration(rules: []))
        let unshaped = RequestSchema(configuration: configuration(rules: ["never.invalid/0/**"]))
        var random = SeededGenerator(state: 7)
        let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
        for index in 0..<30_000 {
            let word = words[Int(random.next() % UInt64(words.count))]
            let id = random.next() % 100_000
            let url: String
            switch index % 9 {
            case 0: url = "https://api.example.com/users/\(id)"
            case 1: url = "https://api.example.com/users/\(id)/orders/\(id % 7)?page=\(id % 3)"
            case 2: url = "https://api.example.com/catalog/\(word)/items/\(id)"
            // A literal position that passes the threshold (learned mid-run) under an id.
            case 3: url = "https://api.example.com/accounts/\(id % 5)/\(word)\(index % 40 < 20 ? "" : "-x")"
            case 4: url = "https://api.example.com/search?q=\(word)\(id)"
            case 5: url = "http://10.0.0.\(id % 4):8080/v\(id % 3)/health"
            // Distinct paths past the cap: the overflow path, never cached.
            case 6:
                let branch = index / 9
                let path = [branch % 4, branch / 4 % 4, branch / 16 % 4].map { words[$0] }.joined(separator: "/")
                url = "https://api.example.com/tree/\(path)/\(id)"
            case 7: url = "https://API.example.com/Users/\(id)/"
            default: url = "https://api.example.com/users/\(id)/avatar"
            }
            let method = index % 5 == 0 ? "POST" : "GET"
            let status = [200, 200, 200, 404, 500, nil][Int(random.next() % 6)]
            let next = sample(url, method: method, status: status)
            #expect(try key(shaped, next) == key(unshaped, next), "\(index): \(url)")
        }
        #expect(unshaped.seriesFoundByShape == 0)
        #expect(shaped.seriesFoundByShape > 10_000, "\(shaped.seriesFoundByShape) of 30,000 found by shape")
        #expect(shaped.pathsOverflowed > 0, "the cap was reached")
        #expect(shaped.pathsOverflowed == unshaped.pathsOverflowed)
    }

    /// A shape is cached only once templating a URL of it changed nothing: the second URL of a new
    /// endpoint is templated again (its segments seen again), so endpoints first called after it are not
    /// held back as new any longer than without the shapes.
    @Test func aShapeIsCachedOnlyOnceItsTemplatingChangesNothing() throws {
        var configuration = APIHealthConfiguration(serviceName: "shapes")
        configuration.capture.learningThreshold = 8
        let shaped = RequestSchema(configuration: configuration)
        configuration.capture.pathRules = ["never.invalid/0"]
        let unshaped = RequestSchema(configuration: configuration)
        for path in ["/users/1", "/users/2", "/orders/1", "/carts/1", "/users/3", "/carts/2", "/users/4"] {
            let next = sample("https://api.example.com" + path)
            #expect(try key(shaped, next) == key(unshaped, next), "\(path)")
        }
        #expect(try key(shaped, sample("https://api.example.com/carts/3")).contains("path=/carts/{id},"))
        #expect(shaped.seriesFoundByShape == 1, "/users/4")
    }

    /// A path rule that names a number decides by the digits: URLs are then not found by their shape.
    @Test func aRuleNamingANumberKeepsItsURLsApart() throws {
        var configuration = APIHealthConfiguration(serviceName: "shapes")
        configuration.capture.pathRules = ["/users/42"]
        let schema = RequestSchema(configuration: configuration)
        for id in 100..<110 { _ = try key(schema, sample("https://api.example.com/users/\(id)")) }
        #expect(try key(schema, sample("https://api.example.com/users/42")).contains("path=/users/42,"))
        #expect(try key(schema, sample("https://api.example.com/users/43")).contains("path=/users/{id},"))
        #expect(schema.seriesFoundByShape == 0)
    }

    /// A GraphQL operation's path tag is its path as the URL writes it, digits and all.
    @Test func graphQLOperationsOnNumberedPathsKeepTheirPaths() throws {
        let schema = RequestSchema(configuration: APIHealthConfiguration(serviceName: "shapes"))
        for version in 1...3 {
            // The second status is a series of its own, rendered when the operation's path is known.
            for status in [200, 500] {
                var next = sample("https://api.example.com/api/\(version)/graphql", status: status)
                next.setGraphQLOperation("GetUser")
                #expect(try key(schema, next).contains("path=/api/\(version)/graphql/GetUser,"))
            }
        }
        #expect(schema.seriesFoundByShape == 0)
    }
}
