import Foundation

/// URLs parsed lately, by their text, for capture that is given a URL as text (AsyncHTTPClient's and
/// Vapor's requests): services call the same URLs again and again, and parsing one costs more than
/// recording its sample (about 6,000 instructions). A direct-mapped table of 1,024 slots, each holding
/// the last URL whose text hashed to it: a lookup hashes the text once (a multiply and a rotation per
/// word, not `Hasher`'s SipHash) and compares it with one entry, and the table never grows.
///
/// ```swift
/// let urls = ParsedURLCache()
/// let url = urls.url(for: "https://api.example.com/users/1")  // parsed once, then found
/// ```
@_spi(Package) public final class ParsedURLCache: Sendable {
    private static let slotCount = 1_024
    private let slots = Locked([(text: String, url: URL)?](repeating: nil, count: ParsedURLCache.slotCount))

    /// An empty cache.
    public init() {}

    /// The URL `text` parses to if it has a host, else `nil`.
    ///
    /// - Parameter text: The URL as text.
    /// - Returns: The parsed URL, or `nil` when it does not parse or has no host.
    public func url(for text: String) -> URL? {
        let slot = Int(truncatingIfNeeded: SeriesCache.hash(text, statusCode: nil)) & (Self.slotCount - 1)
        if let url = slots.withLock({ slots in slots[slot].flatMap { $0.text == text ? $0.url : nil } }) {
            return url
        }
        guard let url = URL(string: text), url.host != nil else { return nil }
        slots.withLock { $0[slot] = (text, url) }
        return url
    }
}
