import Foundation

/// The hosts whose requests are left out: the write destinations (by host and port, so other services
/// on their host are still seen) and ``APIHealthConfiguration/CaptureOptions/excludedHosts`` (a host on
/// any port, or `host:port`). Immutable, so a request's own thread asks it (the URL loading system
/// decides whether to hook a request before it starts) with no lock and no cache: a plain URL's host
/// is compared in place with the few entries, byte by byte.
///
/// ```swift
/// let excluded = ExcludedHosts(entries: ["localhost:8086", "metrics.internal"])
/// excluded.excludes(urlText: "http://LOCALHOST:8086/api/v2/write")  // true
/// ```
struct ExcludedHosts: Sendable {
    private struct HostAndPort: Hashable {
        var name: String
        var port: Int
    }

    /// The entries, lowercased, each whole: a request to one of them on any port is left out.
    private let hosts: Set<String>
    /// The entries of `hosts` that end in `:port`, split: a request to that host on that port is left
    /// out (looked up without writing `host:port` out for every request).
    private let hostPorts: Set<HostAndPort>
    /// Every entry as bytes (the host of a `host:port` one) and its port, for a plain URL's host
    /// compared in place.
    private let entries: [(host: [UInt8], port: Int?)]

    /// The hosts `entries` name (`host` or `host:port`, any case).
    init(entries: some Sequence<String>) {
        let hosts = Set(entries.map { $0.lowercased() })
        let hostPorts = hosts.compactMap { entry -> HostAndPort? in
            guard let colon = entry.lastIndex(of: ":"), let port = Int(entry[entry.index(after: colon)...]),
                entry[entry.index(after: colon)...].allSatisfy({ $0.isASCII && $0.isNumber })
            else { return nil }
            var name = entry[..<colon]
            // An IPv6 literal is written `[::1]:9000`; Foundation gives its host as `::1`.
            if name.first == "[", name.last == "]" { name = name.dropFirst().dropLast() }
            return HostAndPort(name: String(name), port: port)
        }
        self.hosts = hosts
        self.hostPorts = Set(hostPorts)
        self.entries = hosts.map { (Array($0.utf8), nil) } + hostPorts.map { (Array($0.name.utf8), $0.port) }
    }

    /// Whether requests to a URL with `parts` (its host lowercased) are left out; always for a URL
    /// with no host.
    func excludes(_ parts: URLParts) -> Bool {
        guard let name = parts.host else { return true }
        if hosts.isEmpty { return false }
        if hosts.contains(name) { return true }
        guard let port = parts.port, !hostPorts.isEmpty else { return false }
        return hostPorts.contains(HostAndPort(name: name, port: port))
    }

    /// Whether requests to the URL whose absolute string is `text` are left out, read in place; `nil`
    /// when it is not a plain URL (``URLParts/split(_:)``), for ``excludes(_:)`` to decide.
    func excludes(urlText text: String) -> Bool? {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            guard let (_, host, port, _) = URLParts.split(bytes) else { return nil }
            let name = UnsafeBufferPointer(rebasing: bytes[host])
            for entry in entries where entry.port == nil || entry.port == port {
                if Self.equalIgnoringASCIICase(name, lowercased: entry.host) { return true }
            }
            return false
        } ?? nil
    }

    /// Whether `bytes` (ASCII: a plain URL's host) equal `lowercased` once their capitals are lowered.
    private static func equalIgnoringASCIICase(_ bytes: UnsafeBufferPointer<UInt8>, lowercased: [UInt8]) -> Bool {
        guard bytes.count == lowercased.count else { return false }
        for index in 0..<bytes.count {
            var byte = bytes[index]
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte |= 0x20 }
            if byte != lowercased[index] { return false }
        }
        return true
    }
}
