import Foundation
import TestSupport
import Testing

@testable import APIHealth

/// `URLParts` reads a plain URL's host, port and path from its text; it must give what `URL` gives,
/// and leave every URL it cannot read so to `URL`.
@Suite struct URLPartsTests {
    /// What a generated URL is made of: mostly pieces a plain URL has, and one in eight an awkward one (`@`,
    /// `[`, `%`, `;`, `:` twice, non-ASCII, spaces, …), so both the plain reading and the fallback are taken.
    static let plainPieces: [String] = [
        "a", "b", "z", "A", "Q", "0", "9", "-", ".", "_", "~", "/", "//", "=", "&", "+", "!", "$", "'", "(", ")", "*",
        ",", "api", "example", "com", "users", "42", "8443", "65535", "99999", "0",
    ]
    static let awkwardPieces: [String] = [
        "?", "#", ":", "::", "@", "[", "]", "%", "%2F", "%41", ";", " ", "é", "ü", "\u{1F600}", "\t", "\\", "|",
        "^", "`", "{", "}", "<", ">", "\"",
    ]
    static let schemes = ["https", "http", "HTTP", "h2+x-y.z", "1bad", "", "https:", "ws"]

    static func randomURL(_ random: inout SeededGenerator) -> String {
        func part(_ maximum: Int) -> String {
            (0..<Int.random(in: 0...maximum, using: &random)).map { _ in
                (Int.random(in: 0..<8, using: &random) == 0 ? awkwardPieces : plainPieces)
                    .randomElement(using: &random)!
            }
            .joined()
        }
        var text = schemes.randomElement(using: &random)! + "://"
        if Int.random(in: 0..<6, using: &random) == 0 { text += part(2) + "@" }
        text += part(4)
        if Int.random(in: 0..<3, using: &random) == 0 { text += ":" + part(2) }
        if Bool.random(using: &random) { text += "/" + part(6) }
        if Int.random(in: 0..<3, using: &random) == 0 { text += "?" + part(3) }
        if Int.random(in: 0..<4, using: &random) == 0 { text += "#" + part(2) }
        return text
    }

    /// Each segment also as `lowercased()` and `PathTemplater.placeholder(for:)` read it.
    @Test func pathSegmentsAreWhatSplittingOnSlashesGives() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        let pieces = [
            "/", "//", "a", "B", "42", "é", "\u{1F600}", "e\u{301}", "-", " ", "%2F", "{id}", "users", "v2",
            "2024-05-17", "9f3a9f3a9f3a", "ord_123456", "Q",
        ]
        for _ in 0..<RandomCases.count(20_000) {
            let path = (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            let expected = path.split(separator: "/", omittingEmptySubsequences: true)
            let segments = Array(PathSegments(path[...]))
            let readWhileFound = segments.allSatisfy {
                $0.lowercased == $0.text.lowercased() && $0.placeholder == PathTemplater.placeholder(for: $0.text)
            }
            guard path.pathSegments() == expected, segments.map(\.text) == expected, readWhileFound,
                path.dropFirst().pathSegments()
                    == path.dropFirst().split(
                        separator: "/",
                        omittingEmptySubsequences: true
                    )
            else {
                Issue.record("seed \(seed): \(path.debugDescription): \(path.pathSegments()), split gives \(expected)")
                return
            }
        }
    }

    @Test(arguments: ["api.example.com", "API.Example.COM", "", "é.example", "ÀB", "x-Y_z.9", "\u{1F600}Q"])
    func lowercasingOnlyWhenNeededIsLowercasing(text: String) {
        #expect(text.lowercasedIfNeeded() == text.lowercased())
        #expect(PathSegments(("/" + text)[...]).map(\.lowercased) == (text.isEmpty ? [] : [text.lowercased()]))
    }

    /// A URL kept as text (AsyncHTTPClient's, Vapor's) is one `URL(string:)` takes unchanged: the sample's
    /// `url` and the text the agent reads agree.
    @Test func aURLKeptAsTextParsesToItself() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        var kept = 0
        for _ in 0..<RandomCases.count(50_000) {
            let text = Self.randomURL(&random)
            guard URLText.isSafe(text) else { continue }
            kept += 1
            let sample = RequestSample(
                method: "GET",
                urlText: text,
                module: "m",
                startedAt: Date(),
                duration: .zero,
                statusCode: 200,
                error: nil,
                requestBytes: 0,
                responseBytes: 0,
                timeToFirstByte: nil,
                redirectCount: 0,
                correlationID: nil
            )
            guard let url = URL(string: text), url.absoluteString == text, url.host != nil,
                sample.url == url, sample.urlText == text,
                URLParts(url, text: text)
                    == URLParts(scheme: url.scheme, host: url.host, port: url.port, path: url.path)
            else {
                Issue.record(
                    "seed \(seed): \(text.debugDescription) kept as text, URL reads \(String(describing: URL(string: text)))"
                )
                return
            }
        }
        #expect(kept > RandomCases.count(5_000), "\(kept) kept as text (seed \(seed))")
        for unsafe in [
            "http://a b/", "http://h/a b", "http://h/%41", "http://h/p#f", "http://h:70000/", "http://ü.de/",
            "http://u@h/", "http://[::1]/", "h/p", "http://h/\"q\"",
        ] {
            #expect(!URLText.isSafe(unsafe), "\(unsafe)")
        }
    }

    @Test func plainURLsReadAsURLReadsThem() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        var plain = 0
        var fallback = 0
        for _ in 0..<RandomCases.count(50_000) {
            let text = Self.randomURL(&random)
            guard let url = URL(string: text) else { continue }
            // As the schema reads a request's URL: from its absolute string.
            let parts = URLParts(url, text: url.absoluteString)
            let expected = URLParts(scheme: url.scheme, host: url.host, port: url.port, path: url.path)
            guard parts == expected else {
                Issue.record("seed \(seed): \(text.debugDescription): \(parts), URL says \(expected)")
                return
            }
            if URLParts(plain: url.absoluteString) != nil { plain += 1 } else { fallback += 1 }
        }
        #expect(
            plain > RandomCases.count(5_000) && fallback > RandomCases.count(5_000),
            "\(plain) plain, \(fallback) by URL (seed \(seed))"
        )
    }

    @Test(
        arguments: [
            ("https://api.example.com/users/1?page=2", "api.example.com", nil, "/users/1"),
            ("https://API.Example.com:8443/v1/", "API.Example.com", 8443, "/v1"),
            ("http://10.0.0.7:80", "10.0.0.7", 80, ""),
            ("https://api.example.com/", "api.example.com", nil, "/"),
            ("https://api.example.com#top", "api.example.com", nil, ""),
            ("https://api.example.com/a//", "api.example.com", nil, "/a"),
            ("https://api.example.com///", "api.example.com", nil, "/"),
            ("https://api.example.com:0080/a/../b", "api.example.com", 80, "/a/../b"),
        ] as [(String, String, Int?, String)]
    )
    func readsTheHostThePortAndThePath(text: String, host: String, port: Int?, path: String) throws {
        let parts = try #require(URLParts(plain: text))
        #expect(parts == URLParts(scheme: String(text.prefix { $0 != ":" }), host: host, port: port, path: path))
        let url = try #require(URL(string: text))
        #expect(parts == URLParts(scheme: url.scheme, host: url.host, port: url.port, path: url.path))
    }

    @Test(arguments: [
        "https://user:secret@api.example.com/x", "https://[::1]:8080/x", "https://api.example.com/a%2Fb",
        "https://api.example.com/a;b", "https://bücher.example/x", "https://api.example.com:/x",
        "https://api.example.com:123456/x", "https://a:1:2/x", "mailto:someone@example.com", "//api.example.com/x",
    ])
    func leavesAwkwardURLsToFoundation(text: String) {
        #expect(URLParts(plain: text) == nil, "\(text)")
    }
}
