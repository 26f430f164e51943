@_spi(Package) import APIHealth
import APIHealthTestKit
import Foundation
import LineProtocol

/// A loopback API whose endpoints answer with known cache patterns, the requests the cache-advice tests
/// make of it (on an agent clock they move by hand, so each repeat's age is known), and the interval
/// fields each endpoint must then carry: the same for URLSession and AsyncHTTPClient but where the
/// clients differ (a response dropped unread).
///
/// ```swift
/// let scenario = CacheAdviceScenario()
/// let server = try await LoopbackHTTPServer.start(handler: scenario.handler)
/// try await scenario.run(clock: clock, fetch: { path, headers in … }, drop: { path in … })
/// ```
public final class CacheAdviceScenario: Sendable {
    /// One mebibyte of fixed bytes: `/large`, and `/tail` until its last byte changes.
    static let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    /// Identical JSON under every query string of `/items`.
    static let items = Array(#"[{"id":1},{"id":2},{"id":3}]"#.utf8)
    static let catalogue = Array(#"{"catalogue":["tea","coffee","cocoa"]}"#.utf8)
    /// The chunked body: parts of uneven sizes, so the digest sees words split across parts.
    static let chunkedParts: [[UInt8]] = [13, 4_096, 1, 7, 65_536, 3].enumerated().map { index, size in
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index &* 101) }
    }
    /// The ETag of `/document`.
    public static let etag = #""v1""#

    private let calls = Locked([String: Int]())

    public init() {}

    /// Requests the API has answered (or started to) on `path`.
    public func calls(to path: String) -> Int { calls.withLock { $0[path, default: 0] } }

    /// The API: every path answers as its name says; a request with `X-Stall: 1` to `/dropped` gets a head
    /// announcing its body and 64 KiB of it, then nothing until the client leaves.
    public var handler: LoopbackHTTPServer.Handler {
        { [self] request in
            let call = calls.withLock { calls -> Int in
                calls[request.path, default: 0] += 1
                return calls[request.path]!
            }
            switch request.path {
            case "/catalogue":
                return .json(
                    200,
                    String(decoding: Self.catalogue, as: UTF8.self),
                    headers: [("Cache-Control", "no-store")]
                )
            case "/prices":
                return .json(200, #"{"price":\#(call)}"#, headers: [("Cache-Control", "public, max-age=60")])
            case "/items":
                return LoopbackHTTPServer.Response(status: 200, body: .bytes(Self.items))
            case "/document":
                if request.header("If-None-Match") == Self.etag {
                    return LoopbackHTTPServer.Response(status: 304, headers: [("ETag", Self.etag)])
                }
                return .text(200, "the document", headers: [("ETag", Self.etag), ("Cache-Control", "no-cache")])
            case "/chunked":
                return LoopbackHTTPServer.Response(status: 200, body: .chunked(Self.chunkedParts))
            case "/large":
                return LoopbackHTTPServer.Response(status: 200, body: .bytes(Self.large))
            case "/tail":
                var body = Self.large
                if call >= 3 { body[body.count - 1] &+= 1 }
                return LoopbackHTTPServer.Response(status: 200, body: .bytes(body))
            case "/dropped":
                if request.header("X-Stall") == "1" {
                    return LoopbackHTTPServer.Response(
                        status: 200,
                        body: .stalled(totalBytes: 1 << 20, sentBytes: 65_536)
                    )
                }
                return LoopbackHTTPServer.Response(status: 200, body: .bytes(Self.large))
            default:
                return .text(404, "no such path")
            }
        }
    }

    /// Makes the requests, each after the one before has ended: a round at 0 s, one 5 s later and one at
    /// 61 s on `clock`. `fetch` reads a response to its end (its path with the query, and headers to send);
    /// `drop` makes a request of `/dropped` with `X-Stall: 1` and lets its response go unread (whatever the
    /// client does with a body it is no longer interested in).
    public func run(
        advance: (Duration) -> Void,
        fetch: (_ pathAndQuery: String, _ headers: [(String, String)]) async throws -> Int,
        drop: (_ pathAndQuery: String) async throws -> Void
    ) async throws {
        for path in [
            "/catalogue", "/prices", "/items?page=1", "/items?page=2", "/document", "/chunked", "/large", "/tail",
        ] {
            _ = try await fetch(path, [])
        }
        advance(.seconds(5))
        for path in [
            "/catalogue", "/prices", "/items?page=1", "/items?page=2", "/chunked", "/large", "/tail", "/dropped",
        ] {
            _ = try await fetch(path, [])
        }
        let revalidated = try await fetch("/document", [("If-None-Match", Self.etag)])
        precondition(revalidated == 304, "the document was not revalidated: \(revalidated)")
        advance(.seconds(56))
        for path in ["/catalogue", "/document", "/tail"] { _ = try await fetch(path, []) }
        try await drop("/dropped")
        _ = try await fetch("/dropped", [])
    }

    /// The cache fields of one path's interval points, summed over their status classes.
    public struct Expected: Sendable, Equatable, CustomStringConvertible {
        public var storable: Int64
        public var noStore: Int64
        public var withLifetime: Int64
        public var revalidated: Int64
        /// Repeats within each of the age bounds (1, 10, 60, 300, 3,600 s), cumulative, then in all.
        public var repeated: [Int64]

        public var description: String {
            "storable \(storable), no-store \(noStore), lifetime \(withLifetime), 304 \(revalidated), repeated \(repeated)"
        }
    }

    /// What each path's interval points must say. `dropCounts`: the response dropped unread still counts
    /// as a response a cache may store (AsyncHTTPClient: it ended with its status, unread); URLSession
    /// reports a task cancelled mid-body as a cancellation, which no cache field counts.
    public static func expected(dropCounts: Bool) -> [String: Expected] {
        [
            // 0 s, 5 s, 61 s: repeats 5 s and 56 s old, never storable (no-store).
            "/catalogue": Expected(
                storable: 0,
                noStore: 3,
                withLifetime: 0,
                revalidated: 0,
                repeated: [0, 1, 2, 2, 2, 2]
            ),
            // A new body each time, with a lifetime.
            "/prices": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 2,
                revalidated: 0,
                repeated: [0, 0, 0, 0, 0, 0]
            ),
            // Two URLs under one endpoint, each repeated once, 5 s later.
            "/items": Expected(storable: 4, noStore: 0, withLifetime: 0, revalidated: 0, repeated: [0, 2, 2, 2, 2, 2]),
            // 200 at 0 s, 304 at 5 s (the stored response confirmed then), 200 at 61 s: 56 s after the
            // confirmation, not 61 s after the body came.
            "/document": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 1,
                repeated: [0, 0, 1, 1, 1, 1]
            ),
            "/chunked": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                repeated: [0, 1, 1, 1, 1, 1]
            ),
            "/large": Expected(storable: 2, noStore: 0, withLifetime: 0, revalidated: 0, repeated: [0, 1, 1, 1, 1, 1]),
            // The third body differs in its last byte only.
            "/tail": Expected(storable: 3, noStore: 0, withLifetime: 0, revalidated: 0, repeated: [0, 1, 1, 1, 1, 1]),
            // Read at 5 s, dropped unread at 61 s (compared with nothing, replacing nothing), read again at
            // 61 s: a repeat of the one at 5 s.
            "/dropped": Expected(
                storable: dropCounts ? 3 : 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                repeated: [0, 0, 1, 1, 1, 1]
            ),
        ]
    }

    /// The cache fields of `points` (interval points), per path, summed over status classes; every point
    /// that carries them carries all of them.
    public static func observed(_ points: [Point]) -> [String: Expected] {
        typealias F = PointSchema.IntervalField
        var result: [String: Expected] = [:]
        for point in points where point.measurement == PointSchema.Measurement.requestInterval {
            guard let path = point.tags.first(where: { $0.key == PointSchema.Tag.path })?.value,
                point.fields.contains(where: { $0.key == F.cacheStorable })
            else { continue }
            func int(_ key: String) -> Int64 {
                for field in point.fields where field.key == key {
                    if case .int(let value) = field.value { return value }
                }
                return -1_000_000
            }
            var entry =
                result[path]
                ?? Expected(storable: 0, noStore: 0, withLifetime: 0, revalidated: 0, repeated: [0, 0, 0, 0, 0, 0])
            entry.storable += int(F.cacheStorable)
            entry.noStore += int(F.cacheNoStore)
            entry.withLifetime += int(F.cacheWithLifetime)
            entry.revalidated += int(F.cacheRevalidated)
            let repeats = F.cacheAgeBounds.map { int(F.cacheRepeated(withinSeconds: $0)) } + [int(F.cacheRepeated)]
            for index in repeats.indices { entry.repeated[index] += repeats[index] }
            result[path] = entry
        }
        return result
    }

    /// The `duration_ms` of the raw points of `path` but the first (in the order they started): the requests
    /// the scenario repeats.
    public static func repeatedDurations(of path: String, in points: [Point]) -> [Double] {
        let requests = points.filter {
            $0.measurement == PointSchema.Measurement.request && $0.tags.contains(Point.Tag(PointSchema.Tag.path, path))
        }
        return requests.sorted {
            ($0.timestamp?.nanosecondsSinceEpoch ?? 0) < ($1.timestamp?.nanosecondsSinceEpoch ?? 0)
        }
        .dropFirst().compactMap { point -> Double? in
            guard case .float(let milliseconds) = point.fields.first(where: { $0.key == "duration_ms" })?.value
            else { return nil }
            return milliseconds
        }
    }

    /// The `cache_repeated_ms` of each path's interval points, summed.
    public static func repeatedMilliseconds(_ points: [Point]) -> [String: Double] {
        var result: [String: Double] = [:]
        for point in points where point.measurement == PointSchema.Measurement.requestInterval {
            guard let path = point.tags.first(where: { $0.key == PointSchema.Tag.path })?.value else { continue }
            for field in point.fields where field.key == PointSchema.IntervalField.cacheRepeatedMilliseconds {
                if case .float(let value) = field.value { result[path, default: 0] += value }
            }
        }
        return result
    }
}
