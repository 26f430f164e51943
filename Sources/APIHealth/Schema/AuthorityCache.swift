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
/// rendered series it was resolved under (a learned host position bumps it), and is used under that
/// generation only.
///
/// ```swift
/// let authorities = AuthorityCache()
/// let (resolved, path) = authorities.resolve(url, text: url.absoluteString, generation: 0) { parts in … }
/// ```
///
/// `@unchecked Sendable` because only the record loop touches it (as it renders a series): it takes no
/// lock. Whether a request is left out is asked on its own thread, of ``ExcludedHosts``, not here.
final class AuthorityCache: @unchecked Sendable {
    private struct Slot {
        var bytes: [UInt8]
        var resolved: ResolvedAuthority
        var generation: UInt64
    }

    private static let slotCount = 64
    @exclusivity(unchecked) private var slots = [Slot?](repeating: nil, count: AuthorityCache.slotCount)

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
            if let held = slots[slot], held.generation == generation, Self.equal(held.bytes, authority) {
                return (held.resolved, path)
            }
            let parts = URLParts(plain: text, readingPath: false)!.lowercased()
            let resolved = resolve(parts)
            let stored = Slot(bytes: Array(authority), resolved: resolved, generation: generation)
            slots[slot] = stored
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

    private static func slot(of authority: UnsafeBufferPointer<UInt8>) -> Int {
        Int(truncatingIfNeeded: SeriesCache.hash(authority, statusCode: nil)) & (slotCount - 1)
    }

    private static func equal(_ held: [UInt8], _ authority: UnsafeBufferPointer<UInt8>) -> Bool {
        held.withUnsafeBufferPointer { $0.hasSameBytes(as: authority) }
    }
}
