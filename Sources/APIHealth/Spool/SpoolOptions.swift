import Foundation

/// Where and how pending lines are kept on disk.
public struct SpoolOptions: Sendable, Hashable {
    /// The spool directory: created (mode 700) when missing; an existing one must be empty or a spool.
    public var directory: URL
    /// `fsync` after every write-through, so pending lines also survive power loss (slower).
    public var fsync = false
    /// How often recorded lines are written through to the spool (a full batch at once): what a
    /// `kill -9` can lose at most (at 2,000 requests/s, about 40 points per 20 ms). Shorter costs more
    /// small writes; captured requests are encoded on the same beat. Default 20 ms
    /// (`APIHEALTH_WRITE_THROUGH_MS`).
    public var writeThroughInterval: Duration = Self.defaultWriteThroughInterval

    /// The default ``writeThroughInterval``: 20 ms.
    public static let defaultWriteThroughInterval: Duration = .milliseconds(20)

    /// Spool options for `directory`.
    ///
    /// - Parameters:
    ///   - directory: The spool directory, of its own: never a shared one such as `/tmp`.
    ///   - fsync: Whether to `fsync` after every write-through.
    ///   - writeThroughInterval: How often recorded lines are written through to the spool.
    public init(
        directory: URL,
        fsync: Bool = false,
        writeThroughInterval: Duration = Self.defaultWriteThroughInterval
    ) {
        self.directory = directory
        self.fsync = fsync
        self.writeThroughInterval = writeThroughInterval
    }

    /// `$XDG_STATE_HOME/apihealth/<service>` (or `~/.local/state/…`); the caches folder on Apple platforms.
    ///
    /// - Parameter serviceName: The service's name, the last component of the path.
    /// - Returns: The directory a service of that name spools in by default.
    public static func defaultDirectory(serviceName: String) -> URL {
        #if canImport(Darwin)
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first!
        #else
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_STATE_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state")
        #endif
        return base.appendingPathComponent("apihealth").appendingPathComponent(serviceName)
    }
}
