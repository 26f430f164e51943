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
    /// The requests of `/burst` waiting for all eight to have arrived.
    private let burst = Locked((arrived: 0, waiting: [CheckedContinuation<Void, Never>]()))
    /// Requests of `/burst` made together, each answered once all have arrived.
    public static let burstSize = 8

    /// Holds a `/burst` request until ``burstSize`` have arrived (or 60 s have passed, when a client
    /// could not make them together: then the counts say so).
    private func arriveAtBurst() async {
        await withCheckedContinuation { continuation in
            let release = burst.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.waiting.append(continuation)
                guard state.arrived % Self.burstSize == 0 else { return [] }
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiting in release { waiting.resume() }
        }
    }

    private func releaseBurstAfterTimeout() async {
        try? await Task.sleep(for: .seconds(60))
        let release = burst.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiting in release { waiting.resume() }
    }

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
            case "/poll":
                // The body changes once, at the seventh request (30 s into the minute).
                return .json(200, call <= 6 ? #"{"version":1}"# : #"{"version":2}"#)
            case "/burst":
                if call % Self.burstSize == 1 { Task { await self.releaseBurstAfterTimeout() } }
                await arriveAtBurst()
                return .json(200, #"{"burst":true}"#)
            case "/private":
                return .json(200, #"{"items":[]}"#)
            case "/greeting":
                let language = request.header("Accept-Language") ?? "en"
                return .json(200, #"{"greeting":"\#(language)"}"#, headers: [("Vary", "Accept-Language")])
            case "/aged":
                return .json(200, #"{"aged":true}"#, headers: [("Cache-Control", "max-age=60"), ("Age", "50")])
            case "/expires":
                // Expires two minutes ahead of the server's clock, and no Date: counted from the time received.
                let expires = HTTPDateFormat.string(Date().addingTimeInterval(120))
                return .json(200, #"{"expires":true}"#, headers: [("Expires", expires)])
            case "/modified":
                // Last modified a day ago: a heuristic lifetime of a tenth of that.
                let modified = HTTPDateFormat.string(Date().addingTimeInterval(-86_400))
                return .json(200, #"{"modified":true}"#, headers: [("Last-Modified", modified)])
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

    /// Makes the requests, each after the one before has ended but for the burst: a round at 0 s, one 5 s
    /// later and one at 61 s on `clock`; then `/poll` every 5 s for a minute, its body changing at 30 s;
    /// eight requests of `/burst` together; `/private` with `Authorization` twice, 5 s apart; `/greeting` in
    /// English and French twice, 5 s apart; `/aged` (`Age: 50`, `max-age=60`) at 0, 5, 10 and 15 s; and
    /// `/expires` and `/modified` once each. `fetch` reads a response to its end (its path with the query,
    /// and headers to send); `drop` makes a request of `/dropped` with `X-Stall: 1` and lets its response go
    /// unread (whatever the client does with a body it is no longer interested in).
    public func run(
        advance: (Duration) -> Void,
        fetch: @escaping @Sendable (_ pathAndQuery: String, _ headers: [(String, String)]) async throws -> Int,
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

        for index in 0..<12 {
            if index > 0 { advance(.seconds(5)) }
            _ = try await fetch("/poll", [])
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<Self.burstSize { group.addTask { try await fetch("/burst", []) } }
            for try await _ in group {}
        }
        _ = try await fetch("/private", [("Authorization", "Bearer user-1")])
        for language in ["en", "fr"] { _ = try await fetch("/greeting", [("Accept-Language", language)]) }
        _ = try await fetch("/aged", [])
        advance(.seconds(5))
        _ = try await fetch("/private", [("Authorization", "Bearer user-1")])
        for language in ["en", "fr"] { _ = try await fetch("/greeting", [("Accept-Language", language)]) }
        _ = try await fetch("/aged", [])
        for _ in 0..<2 {
            advance(.seconds(5))
            _ = try await fetch("/aged", [])
        }
        _ = try await fetch("/expires", [])
        _ = try await fetch("/modified", [])
    }

    /// The cache fields of one path's interval points, summed over their status classes.
    public struct Expected: Sendable, Equatable, CustomStringConvertible {
        public var storable: Int64
        public var noStore: Int64
        public var withLifetime: Int64
        public var revalidated: Int64
        public var judged: Int64
        public var privateOnly: Int64 = 0
        public var coalescable: Int64 = 0
        /// Hits per candidate lifetime (1, 10, 60, 300, 3,600 s).
        public var hits: [Int64]
        /// Stale responses per candidate lifetime.
        public var stale: [Int64] = [0, 0, 0, 0, 0]

        public var description: String {
            "storable \(storable), no-store \(noStore), lifetime \(withLifetime), 304 \(revalidated), judged \(judged), "
                + "private \(privateOnly), coalescable \(coalescable), hits \(hits), stale \(stale)"
        }
    }

    /// What each path's interval points must say. `dropCounts`: the response dropped unread still counts
    /// as a response a cache may store (AsyncHTTPClient: it ended with its status, unread); URLSession
    /// reports a task cancelled mid-body as a cancellation, which no cache field counts.
    public static func expected(dropCounts: Bool) -> [String: Expected] {
        [
            // 0 s, 5 s, 61 s: served at 5 s from 10 s up, at 61 s from 5 min up (no-store is simulated too:
            // what a cache would have served had the server allowed it).
            "/catalogue": Expected(
                storable: 0,
                noStore: 3,
                withLifetime: 0,
                revalidated: 0,
                judged: 3,
                hits: [0, 1, 1, 2, 2]
            ),
            // A new body each time, with a lifetime: at 5 s any lifetime from 10 s up serves the old price.
            "/prices": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 2,
                revalidated: 0,
                judged: 2,
                hits: [0, 0, 0, 0, 0],
                stale: [0, 1, 1, 1, 1]
            ),
            // Two URLs under one endpoint, each served once, 5 s after it was stored.
            "/items": Expected(
                storable: 4,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 4,
                hits: [0, 2, 2, 2, 2]
            ),
            // 200 at 0 s, 304 at 5 s (the stored copies confirmed then), 200 at 61 s: 56 s after the
            // confirmation, not 61 s after the body came.
            "/document": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 1,
                judged: 2,
                hits: [0, 0, 1, 1, 1]
            ),
            "/chunked": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 2,
                hits: [0, 1, 1, 1, 1]
            ),
            "/large": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 2,
                hits: [0, 1, 1, 1, 1]
            ),
            // The third body differs in its last byte only: at 61 s the 5 min and 1 h copies are stale.
            "/tail": Expected(
                storable: 3,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 3,
                hits: [0, 1, 1, 1, 1],
                stale: [0, 0, 0, 1, 1]
            ),
            // Read at 5 s, dropped unread at 61 s (compared with nothing, replacing nothing), read again at
            // 61 s: served by the copy of 5 s from 60 s up.
            "/dropped": Expected(
                storable: dropCounts ? 3 : 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 2,
                hits: [0, 0, 1, 1, 1]
            ),
            // Every 5 s for a minute, the body changing at 30 s: 10 s serves every other one after the first
            // (and fetches the new body at 30 s); 60 s and up serve the first copy to the end, stale from 30 s.
            "/poll": Expected(
                storable: 12,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 12,
                hits: [0, 6, 5, 5, 5],
                stale: [0, 0, 6, 6, 6]
            ),
            // Eight in flight together: one judged, seven coalescable, no hit.
            "/burst": Expected(
                storable: 8,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 1,
                coalescable: 7,
                hits: [0, 0, 0, 0, 0]
            ),
            // Identical bodies to a request with Authorization: for the client's own cache only.
            "/private": Expected(
                storable: 2,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 2,
                privateOnly: 2,
                hits: [0, 1, 1, 1, 1]
            ),
            // Two variants, two keys: each served once, never the other language's copy.
            "/greeting": Expected(
                storable: 4,
                noStore: 0,
                withLifetime: 0,
                revalidated: 0,
                judged: 4,
                hits: [0, 2, 2, 2, 2]
            ),
            // Age 50 on arrival: under 60 s fresh for 10 s (served at 5 and 15 s, fetched at 10 s).
            "/aged": Expected(
                storable: 4,
                noStore: 0,
                withLifetime: 4,
                revalidated: 0,
                judged: 4,
                hits: [0, 0, 2, 3, 3]
            ),
            "/expires": Expected(
                storable: 1,
                noStore: 0,
                withLifetime: 1,
                revalidated: 0,
                judged: 1,
                hits: [0, 0, 0, 0, 0]
            ),
            "/modified": Expected(
                storable: 1,
                noStore: 0,
                withLifetime: 1,
                revalidated: 0,
                judged: 1,
                hits: [0, 0, 0, 0, 0]
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
                ?? Expected(storable: 0, noStore: 0, withLifetime: 0, revalidated: 0, judged: 0, hits: [0, 0, 0, 0, 0])
            entry.storable += int(F.cacheStorable)
            entry.noStore += int(F.cacheNoStore)
            entry.withLifetime += int(F.cacheWithLifetime)
            entry.revalidated += int(F.cacheRevalidated)
            entry.judged += int(F.cacheJudged)
            entry.privateOnly += int(F.cachePrivateOnly)
            entry.coalescable += int(F.cacheCoalescable)
            for (index, bound) in F.cacheAgeBounds.enumerated() {
                entry.hits[index] += int(F.cacheHits(lifetime: bound))
                entry.stale[index] += int(F.cacheStale(lifetime: bound))
            }
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

    /// The `cache_hits_ms_le_<lifetime>` of each path's interval points, summed.
    public static func hitMilliseconds(_ points: [Point], lifetime: Int64) -> [String: Double] {
        var result: [String: Double] = [:]
        let name = PointSchema.IntervalField.cacheHitsMilliseconds(lifetime: lifetime)
        for point in points where point.measurement == PointSchema.Measurement.requestInterval {
            guard let path = point.tags.first(where: { $0.key == PointSchema.Tag.path })?.value else { continue }
            for field in point.fields where field.key == name {
                if case .float(let value) = field.value { result[path, default: 0] += value }
            }
        }
        return result
    }
}

/// `Date`, `Expires` and `Last-Modified` as HTTP writes them (RFC 9110 section 5.6.7).
enum HTTPDateFormat {
    static func string(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
