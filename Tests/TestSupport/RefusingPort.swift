@_spi(Package) import APIHealth
import Foundation
import APIHealthTestKit

#if canImport(Glibc)
import Glibc
#endif

/// A loopback port that refuses every connection for as long as this value lives: a socket bound to
/// it that never listens. Unlike a port that was free a moment ago, no other process (another test
/// run, another engineer's build) can take it in the meantime.
///
/// ```swift
/// let down = try RefusingPort()
/// // … requests to down.url are refused …
/// let up = try await down.startServer { _ in .text(204, "") }   // the same port comes up
/// ```
public final class RefusingPort: Sendable {
    public let port: Int
    /// The bound socket's descriptor, until a server takes it over.
    private let held: Locked<CInt?>

    public init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure(message: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(descriptor)
            throw TestFailure(message: "binding a loopback port: errno \(code)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        held = Locked(descriptor)
    }

    /// `http://127.0.0.1:<port>`
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts a server on this port: from now on it answers instead of refusing. Only once.
    public func startServer(
        threads: Int = 1,
        handler: @escaping LoopbackHTTPServer.Handler
    ) async throws -> LoopbackHTTPServer {
        guard
            let descriptor = held.withLock({ held in
                defer { held = nil }
                return held
            })
        else {
            throw TestFailure(message: "port \(port) already has its server")
        }
        return try await LoopbackHTTPServer.start(boundSocket: descriptor, threads: threads, handler: handler)
    }

    deinit {
        if let descriptor = held.withLock({ $0 }) { close(descriptor) }
    }
}
