@_spi(Package) import APIHealth
import Foundation

/// A built executable of this package, run as a real child process.
public final class Child: Sendable {
    public let process: Process
    private let output = Locked(Data())
    private let errors = Locked(Data())
    /// Each stdout line with the time it arrived.
    private let timedLines = Locked([(ContinuousClock.Instant, String)]())
    private let partial = Locked(Data())
    private let outputEnded = Locked(false)

    /// The folder holding the built executables (`swift build --show-bin-path`).
    public static func binDirectory() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["APIHEALTH_TEST_BIN_DIR"] {
            return URL(fileURLWithPath: path)
        }
        // Running `swift test` directly: the test bundle sits in the bin folder.
        let bundle = Bundle.main.bundleURL
        for candidate in [bundle.deletingLastPathComponent(), bundle, URL(fileURLWithPath: ".build/debug")]
        where FileManager.default.fileExists(atPath: candidate.appendingPathComponent("influx-tail").path) {
            return candidate
        }
        throw TestServers.Missing(variable: "APIHEALTH_TEST_BIN_DIR")
    }

    /// Starts `executable`: one of this package's (in ``binDirectory()``), or an absolute path (a tool such as
    /// `/usr/bin/vmalert`).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL =
            executable.hasPrefix("/")
            ? URL(fileURLWithPath: executable) : try Self.binDirectory().appendingPathComponent(executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let output = self.output
        let timedLines = self.timedLines
        let partial = self.partial
        let outputEnded = self.outputEnded
        out.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                outputEnded.withLock { $0 = true }
                handle.readabilityHandler = nil
                return
            }
            let now = ContinuousClock.now
            output.withLock { $0.append(data) }
            let lines = partial.withLock { buffer -> [String] in
                buffer.append(data)
                var lines: [String] = []
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                return lines
            }
            timedLines.withLock { $0 += lines.map { (now, $0) } }
        }
        let errors = self.errors
        err.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            errors.withLock { $0.append(data) }
        }
        try process.run()
    }

    public var stdout: String { String(decoding: output.withLock { $0 }, as: UTF8.self) }
    public var stderr: String { String(decoding: errors.withLock { $0 }, as: UTF8.self) }
    public var lines: [(at: ContinuousClock.Instant, text: String)] {
        timedLines.withLock { $0.map { (at: $0.0, text: $0.1) } }
    }

    /// When the first stdout line equal to `text` arrived; `nil` while none has. Cheap however much
    /// the child has printed after it.
    public func arrival(ofLine text: String) -> ContinuousClock.Instant? {
        timedLines.withLock { lines in lines.first { $0.1 == text }?.0 }
    }

    public func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to end; `nil` if it is still running after `timeout` (it is then killed).
    public func wait(timeout: Duration = .seconds(60)) async -> Int32? {
        _ = await waitUntil(timeout: timeout) { !process.isRunning }
        if process.isRunning {
            signal(SIGKILL)
            process.waitUntilExit()
            return nil
        }
        _ = await waitUntil { outputEnded.withLock { $0 } }
        return process.terminationStatus
    }

    /// Runs to completion and returns the exit status, stdout and stderr (read from files after exit, so
    /// nothing is lost however fast the child writes and exits). `executable` is one of this package's
    /// (in ``binDirectory()``), or an absolute path (a tool such as `/usr/bin/vmalert`). With `user`, the child runs as that
    /// unprivileged user (through `setpriv`, with only `PATH` and `HOME` in its environment), from a
    /// copy of the executable in a folder every user can enter: the checkout may sit in a folder only
    /// its owner can enter (a `mktemp -d` parent), where the user could not even reach the binary.
    public static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        asUser user: String? = nil
    ) async throws -> (status: Int32?, stdout: String, stderr: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let outURL = folder.appendingPathComponent("stdout")
        let errURL = folder.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        var path =
            executable.hasPrefix("/")
            ? URL(fileURLWithPath: executable) : try binDirectory().appendingPathComponent(executable)
        let shared = try user.map { try sharedTemporaryDirectory("apihealth-\($0)") }
        defer { if let shared { try? FileManager.default.removeItem(at: shared) } }
        if let user, let shared {
            path = try stage(path, in: shared)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(user)", "--regid=nogroup", "--clear-groups", path.path] + arguments
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"].merging(environment) { $1 }
            process.currentDirectoryURL = shared
        } else {
            process.executableURL = path
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        _ = await waitUntil(timeout: .seconds(60)) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try out.close()
        try err.close()
        let stdout = String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self)
        let stderr = String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self)
        return (process.terminationStatus, stdout, stderr)
    }

    /// Copies `executable` into `folder`, readable and runnable by every user. Returns the copy. The
    /// package's own modules are linked into it; the libraries it loads are the toolchain's.
    private static func stage(_ executable: URL, in folder: URL) throws -> URL {
        let copy = folder.appendingPathComponent(executable.lastPathComponent)
        try FileManager.default.copyItem(at: executable, to: copy)
        guard chmod(copy.path, 0o755) == 0 else { throw TestFailure(message: "chmod \(copy.path): errno \(errno)") }
        return copy
    }
}

/// A fresh, empty folder under /tmp that every user can enter (mode 0755), for what a test runs as
/// another user or hands to one: `temporaryDirectory()` follows `TMPDIR`, which may lie in a folder
/// only its owner can enter.
public func sharedTemporaryDirectory(_ prefix: String) throws -> URL {
    var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw TestFailure(message: "mkdtemp: errno \(errno)") }
    let path = String(cString: made)
    guard chmod(path, 0o755) == 0 else { throw TestFailure(message: "chmod \(path): errno \(errno)") }
    return URL(fileURLWithPath: path, isDirectory: true)
}
