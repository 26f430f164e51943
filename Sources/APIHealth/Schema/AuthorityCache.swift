import Foundation

/// What the schema makes of the scheme, host and port of a URL: the parts (scheme and host
/// lowercased, no path), whether requests to it are left out, and its `host` tag.
struct ResolvedAuthority {
    let parts: URLParts
    let excluded: Bool
    let hostTag: String
}

/// The resolved authorities (`scheme://host:port`) of the URLs a service calls lately, by their text:
/// a URL not seen before is most often one more path on a host called before, whose exclusion and
/// folded host tag need not be worked out again. A direct-mapped table of 64 slots, each holding the
/// last authority whose text hashed to it, found by hashing the bytes before the path and comparing
/// them in place (nothing allocated on a hit).
///
/// A host tag depends on what the ``HostLearner`` learned: every slot holds the generation of the
/// rendered series it was resolved under (a learned host position bumps it), and is used for a later
/// generation only for what does not depend on it (the parts and the exclusion).
///
/// ```swift
/// let authorities = AuthorityCache()
/// let (resolved, path) = authorities.resolve(url, text: url.absoluteString, generation: 0) { parts in … }
/// ```
final class AuthorityCache: Sendable {
    private struct Slot {
        var bytes: [UInt8]
        var resolved: ResolvedAuthority
        var generation: UInt64
    }

    private static let slotCount = 64
    private let slots = Locked([Slot?](repeating: nil, count: AuthorityCache.slotCount))

    /// The resolved authority of `sample`'s URL (whose absolute string is `text`) under `generation`, and its path
    /// (as `URL.path` gives it); `resolve` works it out from the URL's lowercased parts when no slot holds it.
    func resolve(
        _ sample: RequestSample,
        text: String,
        generation: UInt64,
        resolving resolve: (URLParts) -> ResolvedAuthority
    ) -> (ResolvedAuthority, Substring) {
        let plain = text.utf8.withContiguousStorageIfAvailable { bytes -> (ResolvedAuthority, Range<Int>)? in
            guard let (_, _, _, path) = URLParts.split(bytes) else { return nil }
            let authority = UnsafeBufferPointer(rebasing: bytes[..<path.lowerBound])
            let slot = Self.slot(of: authority)
            let found = slots.withLock { slots -> ResolvedAuthority? in
                guard let held = slots[slot], held.generation == generation, Self.equal(held.bytes, authority) else {
                    return nil
                }
                return held.resolved
            }
            if let found { return (found, path) }
            let parts = URLParts(plain: text, readingPath: false)!.lowercased()
            let resolved = resolve(parts)
            let stored = Slot(bytes: Array(authority), resolved: resolved, generation: generation)
            slots.withLock { $0[slot] = stored }
            return (resolved, path)
        }
        if let (resolved, path) = plain ?? nil {
            let utf8 = text.utf8
            let start = utf8.index(utf8.startIndex, offsetBy: path.lowerBound)
            let end = utf8.index(start, offsetBy: path.count)
            return (resolved, text[start..<end])
        }
        let url = sample.url
        let parts = URLParts(url, text: text).lowercased()
        return (resolve(parts), Substring(parts.path))
    }

    /// Whether requests to a URL whose absolute string is `text` are left out: from its slot when one
    /// holds its authority (whatever its generation: exclusion does not change), else worked out by
    /// `exclusion` from its lowercased parts and kept (with no host tag, for no generation); `nil` when
    /// the URL is not a plain one.
    func isExcluded(_ text: String, exclusion: (URLParts) -> Bool) -> Bool? {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            guard let (_, _, _, path) = URLParts.split(bytes) else { return nil }
            let authority = UnsafeBufferPointer(rebasing: bytes[..<path.lowerBound])
            let slot = Self.slot(of: authority)
            let found = slots.withLock { slots -> Bool? in
                guard let held = slots[slot], Self.equal(held.bytes, authority) else { return nil }
                return held.resolved.excluded
            }
            if let found { return found }
            let parts = URLParts(plain: text, readingPath: false)!.lowercased()
            let excluded = exclusion(parts)
            let resolved = ResolvedAuthority(parts: parts, excluded: excluded, hostTag: "")
            let stored = Slot(bytes: Array(authority), resolved: resolved, generation: Self.noGeneration)
            slots.withLock { $0[slot] = stored }
            return excluded
        } ?? nil
    }

    /// The generation of a slot whose host tag was not worked out: no rendered series has it.
    private static let noGeneration = UInt64.max

    private static func slot(of authority: UnsafeBufferPointer<UInt8>) -> Int {
        Int(truncatingIfNeeded: SeriesCache.hash(authority, statusCode: nil)) & (slotCount - 1)
    }

    private static func equal(_ held: [UInt8], _ authority: UnsafeBufferPointer<UInt8>) -> Bool {
        held.count == authority.count
            && held.withUnsafeBufferPointer { memcmp($0.baseAddress!, authority.baseAddress!, authority.count) == 0 }
    }
}
