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
    /// Each slot's text and its URL; a text that ``URLText/isSafe(_:)`` is held unparsed (`url` `nil`)
    /// until something needs its URL.
    private let slots = Locked([(text: String, url: URL?)?](repeating: nil, count: ParsedURLCache.slotCount))

    /// An empty cache.
    public init() {}

    /// The URL `text` parses to if it has a host, else `nil`.
    ///
    /// - Parameter text: The URL as text.
    /// - Returns: The parsed URL, or `nil` when it does not parse or has no host.
    public func url(for text: String) -> URL? {
        let slot = Self.slot(of: text)
        if let url = slots.withLock({ slots in slots[slot].flatMap { $0.text == text ? $0.url : nil } }) {
            return url
        }
        guard let url = URL(string: text), url.host != nil else { return nil }
        slots.withLock { $0[slot] = (text, url) }
        return url
    }

    /// What a sample keeps of the URL `text`: the text itself when `URL(string:)` would take it unchanged
    /// (``URLText/isSafe(_:)``: nothing parsed), else its URL; `nil` when it does not parse or has no host.
    ///
    /// - Parameter text: The URL as text.
    /// - Returns: `text` or its URL, or `nil`.
    public func kept(_ text: String) -> KeptURL? {
        let slot = Self.slot(of: text)
        let held = slots.withLock { slots -> KeptURL? in
            guard let entry = slots[slot], entry.text == text else { return nil }
            return entry.url.map(KeptURL.url) ?? .text(text)
        }
        if let held { return held }
        if URLText.isSafe(text) {
            slots.withLock { $0[slot] = (text, nil) }
            return .text(text)
        }
        return url(for: text).map(KeptURL.url)
    }

    private static func slot(of text: String) -> Int {
        Int(truncatingIfNeeded: SeriesCache.hash(text, statusCode: nil)) & (slotCount - 1)
    }
}

/// A URL as a sample keeps it (see ``ParsedURLCache/kept(_:)``).
@_spi(Package) public enum KeptURL: Sendable {
    /// Text that `URL(string:)` takes unchanged.
    case text(String)
    case url(URL)
}
