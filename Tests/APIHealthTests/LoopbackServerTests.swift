import Foundation
import APIHealthTestKit
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs `body` with this process's standard error also written to a file; returns what was written
/// meanwhile (and writes it on to the real standard error).
private func capturingStandardError(_ body: () async throws -> Void) async rethrows -> String {
    let file = temporaryDirectory("stderr").appendingPathComponent("stderr.txt")
    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
    let saved = dup(2)
    let capture = open(file.path, O_WRONLY | O_APPEND)
    dup2(capture, 2)
    close(capture)
    defer {
        dup2(saved, 2)
        close(saved)
    }
    try await body()
    let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    FileHandle.standardError.write(Data(text.utf8))
    return text
}

/// Whether a TCP connection to `127.0.0.1:port` is accepted.
private func accepts(port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

@Suite struct LoopbackServerTests {
    /// `shutdown()` stops the event loops only after every response under way has finished with them:
    /// SwiftNIO's "Cannot schedule tasks on an EventLoop that has already shut down" is never printed.
    @Test func shutdownStopsTheEventLoopsOnlyAfterTheResponsesUnderWay() async throws {
        // The handler hands over the continuation it waits on (a wait its cancellation does not end).
        let entered = AsyncStream<CheckedContinuation<Void, Never>>.makeStream()
        let returned = Locked(false)
        let output = try await capturingStandardError {
            let server = try await LoopbackHTTPServer.start { _ in
                await withCheckedContinuation { entered.continuation.yield($0) }
                return .text(200, "late")
            }
            let port = server.port
            let client = Task { _ = try? await URLSession.shared.data(from: URL(string: server.baseURL + "/slow")!) }
            var handlers = entered.stream.makeAsyncIterator()
            let release = try #require(await handlers.next())
            let shutdown = Task {
                try await server.shutdown()
                returned.withLock { $0 = true }
            }
            // Listening stops at once…
            #expect(await waitUntil { !accepts(port: port) })
            // …but the event loops stay up while the response is under way.
            #expect(
                await waitUntil(timeout: .seconds(2)) { returned.withLock { $0 } } == false,
                "shutdown waits for the response"
            )
            release.resume()
            try await shutdown.value
            _ = await client.value
        }
        #expect(!output.contains("Cannot schedule tasks"), "\(output)")
    }
}
