@_spi(Package) import APIHealth
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A built executable of this package run with a real pseudo-terminal as its standard output and error,
/// and everything the terminal received, read by the test itself: no `script(1)` or shell in between,
/// so the child's exit status and its last bytes are always seen. A `nil` in `environment` removes
/// that variable.
///
/// ```swift
/// let run = try TerminalChild("influx-tail", ["--spool", path, "--summary"])
/// let (status, screen) = await run.finish()
/// ```
public final class TerminalChild: Sendable {
    public let process: Process
    private let received = Locked([UInt8]())
    private let ended = Locked(false)

    public init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String?] = [:],
        columns: UInt16 = 160,
        rows: UInt16 = 40
    ) throws {
        let (primary, name) = try Self.openPrimary()
        var size = winsize(ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(primary, UInt(TIOCSWINSZ), &size)
        let secondary = open(name, O_RDWR | O_NOCTTY)
        guard secondary >= 0 else {
            close(primary)
            throw TestFailure(message: "open \(name): errno \(errno)")
        }
        process = Process()
        process.executableURL = try Child.binDirectory().appendingPathComponent(executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["TERM"] = "xterm-256color"
        env["NO_COLOR"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let terminal = FileHandle(fileDescriptor: secondary, closeOnDealloc: false)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = terminal
        process.standardError = terminal
        do {
            try process.run()
        } catch {
            close(secondary)
            close(primary)
            throw error
        }
        // Only the child holds the terminal now: once it exits, reading the primary side ends.
        close(secondary)
        let received = self.received
        let ended = self.ended
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(primary, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                received.withLock { $0 += buffer[0..<count] }
            }
            close(primary)
            ended.withLock { $0 = true }
        }
    }

    /// Opens a new pseudo-terminal's primary side, unlocked; returns it and the secondary side's path.
    private static func openPrimary() throws -> (Int32, String) {
        #if os(Linux)
        // `posix_openpt` and friends need `_XOPEN_SOURCE`, which the Glibc module is not built with; these
        // are the ioctls they make (`TIOCSPTLCK`, `TIOCGPTN`, the same numbers on every Linux architecture
        // this runs on).
        let primary = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        guard primary >= 0 else { throw TestFailure(message: "open /dev/ptmx: errno \(errno)") }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(primary, 0x4004_5431, &unlock) == 0, ioctl(primary, 0x8004_5430, &number) == 0 else {
            close(primary)
            throw TestFailure(message: "unlocking the pseudo-terminal: errno \(errno)")
        }
        return (primary, "/dev/pts/\(number)")
        #else
        let primary = posix_openpt(O_RDWR | O_NOCTTY)
        guard primary >= 0 else { throw TestFailure(message: "posix_openpt: errno \(errno)") }
        guard grantpt(primary) == 0, unlockpt(primary) == 0, let name = ptsname(primary) else {
            close(primary)
            throw TestFailure(message: "grantpt/unlockpt/ptsname: errno \(errno)")
        }
        return (primary, String(cString: name))
        #endif
    }

    /// What the terminal has received so far.
    public var screen: String { String(decoding: received.withLock { $0 }, as: UTF8.self) }

    public func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the child to end (killing it if it has not after ``eventTimeout``) and for the terminal's
    /// last bytes; returns the exit status (`nil` when it had to be killed) and what the terminal received.
    public func finish() async -> (status: Int32?, screen: String) {
        let exited = await waitUntil { !process.isRunning }
        if !exited { signal(SIGKILL) }
        process.waitUntilExit()
        _ = await waitUntil { ended.withLock { $0 } }
        return (exited ? process.terminationStatus : nil, screen)
    }
}
