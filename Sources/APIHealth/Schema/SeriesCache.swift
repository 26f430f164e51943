import Foundation
import LineProtocol

/// The rendered series of recent URLs: a set-associative table (1,024 sets of 4) indexed by a hash of
/// the URL's text and the status, so a sample finds its series by hashing its URL once with a cheap
/// word-at-a-time hash and comparing the few entries of one set.
struct SeriesCache {
    static let sets = 1_024
    static let ways = 4
    /// Bumped by every ``removeAll()``: the generation the entries were rendered under.
    private var learned: UInt64 = 0
    /// Each entry's hash (0: empty), apart from the entries so a lookup reads one cache line.
    private var hashes: [UInt64] = []
    private var entries: [(url: String, series: RequestSeries)?] = []
    /// Which way of a full set is replaced next.
    private var victim = 0

    /// A nonzero hash of `url`'s UTF-8 and `statusCode`.
    static func hash(_ url: String, statusCode: Int?) -> UInt64 {
        withUTF8Bytes(url) { hash($0, statusCode: statusCode) }
    }

    /// A nonzero hash of `bytes` and `statusCode`.
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>, statusCode: Int?) -> UInt64 {
        // The status and the length spread over the seed by one multiply: XORed in as they are, a
        // length or status one bit apart would cancel a first byte one bit apart.
        let shape = (UInt64(bitPattern: Int64(statusCode ?? -1)) << 32) ^ UInt64(bytes.count)
        var hash = 0x9E37_79B9_7F4A_7C15 ^ (shape &* 0xC2B2_AE3D_27D4_EB4F)
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            var offset = 0
            // A multiply and a rotation per word and at the end: the table needs well spread low bits
            // and few collisions, not a hash an adversary cannot steer (an entry is only used when its
            // URL is equal too).
            while offset + 8 <= bytes.count {
                let mixed = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15
                hash = (mixed << 29) | (mixed >> 35)
                offset += 8
            }
            var tail: UInt64 = 0
            if offset == bytes.count {
                // No bytes left over.
            } else if bytes.count >= 8 {
                // The last eight bytes in one load, overlapping the last word taken (the length is in
                // the seed: texts of different lengths with the same words start apart).
                tail = raw.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
            } else {
                var shift: UInt64 = 0
                while offset < bytes.count {
                    tail |= UInt64(bytes[offset]) << shift
                    shift += 8
                    offset += 1
                }
            }
            // The last multiply's top bits, which every bit of its input reaches, rotated into the low
            // bits the table indexes by.
            let mixed = (hash ^ tail) &* 0x9E37_79B9_7F4A_7C15
            hash = (mixed << 10) | (mixed >> 54)
        }
        return hash == 0 ? 1 : hash
    }

    /// The generation the entries were rendered under: what an entry rendered after a miss is inserted with.
    var generation: UInt64 { learned }

    mutating func series(for sample: RequestSample, url: String, hash: UInt64) -> RequestSeries? {
        guard !hashes.isEmpty else { return nil }
        let first = (Int(truncatingIfNeeded: hash) & (Self.sets - 1)) * Self.ways
        for slot in first..<(first + Self.ways) where hashes[slot] == hash {
            if let entry = entries[slot], entry.url == url, entry.series.isSeries(of: sample) { return entry.series }
        }
        return nil
    }

    /// The series of `sample` cached under a text whose bytes are `text` (a ``URLShape``), compared in place.
    mutating func series(for sample: RequestSample, text: UnsafeBufferPointer<UInt8>, hash: UInt64) -> RequestSeries? {
        guard !hashes.isEmpty else { return nil }
        let first = (Int(truncatingIfNeeded: hash) & (Self.sets - 1)) * Self.ways
        for slot in first..<(first + Self.ways) where hashes[slot] == hash {
            if let entry = entries[slot], entry.series.isSeries(of: sample),
                withUTF8Bytes(entry.url, { $0.hasSameBytes(as: text) })
            {
                return entry.series
            }
        }
        return nil
    }

    mutating func insert(_ series: RequestSeries, url: String, hash: UInt64, learned: UInt64) {
        guard learned == self.learned else { return }
        if hashes.isEmpty {
            hashes = Array(repeating: 0, count: Self.sets * Self.ways)
            entries = Array(repeating: nil, count: Self.sets * Self.ways)
        }
        let first = (Int(truncatingIfNeeded: hash) & (Self.sets - 1)) * Self.ways
        var slot = first + victim
        for candidate in first..<(first + Self.ways) where hashes[candidate] == 0 {
            slot = candidate
            break
        }
        if slot == first + victim { victim = (victim + 1) % Self.ways }
        hashes[slot] = hash
        entries[slot] = (url, series)
    }

    /// Forgets every entry, and refuses the ones rendered before.
    mutating func removeAll() {
        learned &+= 1
        hashes = []
        entries = []
    }
}

/// What a request's series depends on besides its URL's text: its endpoint (host tag, templated
/// path), the URL's own scheme, host and port (a success rule's host pattern reads them), method,
/// module and status.
struct EndpointSeriesKey: Hashable {
    var scheme: String
    var host: String
    var port: Int?
    var hostTag: String
    var path: String
    var method: String
    var module: String
    var statusCode: Int?

    /// Hashes what tells endpoints apart (the host name, not the host tag: many hosts fold to one tag),
    /// their path and status; keys that differ only in what is left out — scheme, port, a host tag
    /// derived from the same host, method or module (a few per endpoint) — are told apart by `==`.
    func hash(into hasher: inout Hasher) {
        hasher.combine(host)
        hasher.combine(path)
        hasher.combine(statusCode)
    }
}

/// The schema's cache of rendered series: a request finds its series here and is counted in its
/// endpoint's aggregate (``EndpointInterval``) at once.
///
/// Whatever changes the series of a URL (a path or host position learned, an endpoint's aggregate
/// evicted) calls ``invalidate()``; a series rendered before that is not inserted.
///
/// ```swift
/// let rendered = RenderedSeries()
/// let (found, generation) = rendered.series(for: sample, url: url, hash: hash) { series in count(series) }
/// if found == nil { rendered.insert(render(sample), url: url, hash: hash, generation: generation) { count($0) } }
/// ```
///
/// `@unchecked Sendable` because only the record loop touches it (as it records, and as its learners
/// and aggregator invalidate it): it takes no lock.
final class RenderedSeries: @unchecked Sendable {
    @exclusivity(unchecked) private var cache = SeriesCache()
    /// The series of recent URL shapes (``URLShape``), for URLs not in `cache` that differ from one
    /// rendered before only in numeric ids or the query. A shape is cached only after its URL's path was
    /// templated without the learners changing: templating another URL of the shape would change
    /// nothing either (see ``RequestSchema``).
    @exclusivity(unchecked) private var shapes = SeriesCache()
    /// Samples whose series was found by their URL's shape.
    private(set) var foundByShape: UInt64 = 0
    /// The series of each endpoint seen since the last invalidation, for URLs not in `cache` (a path
    /// with an id seen for the first time); emptied when it reaches ``maximumEndpoints``.
    @exclusivity(unchecked) private var endpoints: [EndpointSeriesKey: RequestSeries] = [:]
    static let maximumEndpoints = 4_096

    /// The cached series of `sample` (`url` its URL's text, `hash` their ``SeriesCache/hash(_:statusCode:)``)
    /// with what `count` made of it; and the generation to insert a series rendered on a miss with.
    @inline(__always)
    func series<Counted>(
        for sample: RequestSample,
        url: String,
        hash: UInt64,
        counting count: (RequestSeries) -> Counted
    ) -> (found: (RequestSeries, Counted)?, generation: UInt64) {
        guard let series = cache.series(for: sample, url: url, hash: hash) else { return (nil, cache.generation) }
        return ((series, count(series)), cache.generation)
    }

    /// The series cached for the shape of `sample`'s URL (`url` its text) with what `count` made of it,
    /// or the shape's hash to cache the series rendered on a miss with (`nil`: the URL has no shape).
    func series<Counted>(
        forShapeOf sample: RequestSample,
        url: String,
        counting count: (RequestSeries) -> Counted
    ) -> (found: (RequestSeries, Counted)?, shapeHash: UInt64?) {
        URLShape.withShape(of: url) { shape in
            guard let shape else { return (nil, nil) }
            let hash = SeriesCache.hash(shape, statusCode: sample.statusCode)
            guard let series = shapes.series(for: sample, text: shape, hash: hash) else { return (nil, hash) }
            foundByShape &+= 1
            return ((series, count(series)), hash)
        }
    }

    /// The series of `endpoint` if one was rendered since `generation` (then cached for `url` too, and
    /// for its shape when `shapeHash` is given), with what `count` made of it.
    func series<Counted>(
        ofEndpoint endpoint: EndpointSeriesKey,
        url: String,
        hash: UInt64,
        shapeHash: UInt64?,
        generation: UInt64,
        counting count: (RequestSeries) -> Counted
    ) -> (RequestSeries, Counted)? {
        guard generation == cache.generation, let series = endpoints[endpoint] else { return nil }
        cache.insert(series, url: url, hash: hash, learned: generation)
        insertShape(of: url, series, shapeHash: shapeHash, generation: generation)
        return (series, count(series))
    }

    private func insertShape(of url: String, _ series: RequestSeries, shapeHash: UInt64?, generation: UInt64) {
        guard let shapeHash, generation == shapes.generation, let shape = URLShape.string(of: url) else { return }
        shapes.insert(series, url: shape, hash: shapeHash, learned: generation)
    }

    /// Caches `series` (for `url`, for `endpoint` when given, and for the URL's shape when `shapeHash` is),
    /// unless the cache was invalidated since `generation` (or `caches` is false), and returns what `count`
    /// made of it.
    @inline(__always)
    func insert<Counted>(
        _ series: RequestSeries,
        url: String,
        hash: UInt64,
        endpoint: EndpointSeriesKey? = nil,
        shapeHash: UInt64? = nil,
        generation: UInt64,
        caches: Bool = true,
        counting count: (RequestSeries) -> Counted
    ) -> Counted {
        if caches {
            cache.insert(series, url: url, hash: hash, learned: generation)
            insertShape(of: url, series, shapeHash: shapeHash, generation: generation)
            if let endpoint, generation == cache.generation {
                if endpoints.count >= Self.maximumEndpoints { endpoints.removeAll(keepingCapacity: true) }
                endpoints[endpoint] = series
            }
        }
        return count(series)
    }

    /// Forgets every series: the series of some URL changed.
    func invalidate() {
        cache.removeAll()
        shapes.removeAll()
        endpoints.removeAll()
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether `other` holds the same bytes (compared with `memcmp`).
    func hasSameBytes(as other: UnsafeBufferPointer<UInt8>) -> Bool {
        guard count == other.count else { return false }
        guard let left = baseAddress, let right = other.baseAddress else { return true }
        return memcmp(left, right, count) == 0
    }
}
