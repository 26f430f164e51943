import Foundation
import LineProtocol

/// The rendered series of recent URLs: a set-associative table (1,024 sets of 4) indexed by a hash of
/// the URL's text and the status, so a sample finds its series by hashing its URL once with a cheap
/// word-at-a-time hash and comparing the few entries of one set.
struct SeriesCache {
    static let sets = 1_024
    static let ways = 4
    /// The learner's count of learned positions the entries were rendered under.
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

    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>, statusCode: Int?) -> UInt64 {
        var hash = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: Int64(statusCode ?? -1)) ^ UInt64(bytes.count)
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            var offset = 0
            while offset + 8 <= bytes.count {
                hash = mix64(hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset += 8
            }
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count {
                tail |= UInt64(bytes[offset]) << shift
                shift += 8
                offset += 1
            }
            hash = mix64(hash ^ tail)
        }
        return hash == 0 ? 1 : hash
    }

    mutating func series(for sample: RequestSample, url: String, hash: UInt64, learned: UInt64) -> RequestSeries? {
        guard learned == self.learned, !hashes.isEmpty else {
            if learned != self.learned { removeAll(learned: learned) }
            return nil
        }
        let first = (Int(truncatingIfNeeded: hash) & (Self.sets - 1)) * Self.ways
        for slot in first..<(first + Self.ways) where hashes[slot] == hash {
            if let entry = entries[slot], entry.url == url, entry.series.isSeries(of: sample) { return entry.series }
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

    private mutating func removeAll(learned: UInt64) {
        self.learned = learned
        hashes = []
        entries = []
    }
}
