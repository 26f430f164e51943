/// Why the spool could not be opened or used.
///
/// ```swift
/// do {
///     let agent = try APIHealthAgent(configuration: configuration, logger: logger)
/// } catch let error as SpoolError where error.code == .notASpool {
///     logger.error("choose an empty or new directory for the spool: \(error)")
/// }
/// ```
public struct SpoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is; new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Another agent holds the directory's lock: one agent per spool directory.
        public static let locked = Code("locked")
        /// The directory is missing and could not be created.
        public static let cannotCreate = Code("cannotCreate")
        /// The directory or a file cannot be read or written by this user.
        public static let permissionDenied = Code("permissionDenied")
        /// The directory does not exist (readers do not create it).
        public static let missing = Code("missing")
        /// A file operation failed.
        public static let io = Code("io")
        /// The path is not a directory this user may trust: a symbolic link, not a directory, owned by
        /// another user, or writable by group or others.
        public static let unsafe = Code("unsafe")
        /// The directory holds files but was not created as a spool: the agent never touches it.
        public static let notASpool = Code("notASpool")
        /// The agent let go of the spool after shutdown: it writes no more files there.
        public static let released = Code("released")
    }

    /// What kind of problem it is.
    public var code: Code
    /// The directory or file concerned.
    public var path: String
    /// What went wrong, for people.
    public var reason: String

    package init(code: Code, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    /// Another agent holds the lock of `directory`.
    package static func locked(directory: String) -> SpoolError {
        SpoolError(code: .locked, path: directory, reason: "in use by another agent (one agent per spool directory)")
    }

    /// `directory` is missing and could not be created.
    package static func cannotCreate(directory: String, reason: String) -> SpoolError {
        SpoolError(code: .cannotCreate, path: directory, reason: "cannot create the spool: \(reason)")
    }

    /// This user may not use `path`.
    package static func permissionDenied(path: String) -> SpoolError {
        SpoolError(code: .permissionDenied, path: path, reason: "permission denied")
    }

    /// No spool directory at `directory`.
    package static func missing(directory: String) -> SpoolError {
        SpoolError(code: .missing, path: directory, reason: "no spool directory at \(directory)")
    }

    /// A file operation on `path` failed.
    package static func io(path: String, reason: String) -> SpoolError {
        SpoolError(code: .io, path: path, reason: reason)
    }

    /// The agent let go of the spool at `directory`; nothing more is written there.
    package static func released(directory: String) -> SpoolError {
        SpoolError(code: .released, path: directory, reason: "released after shutdown: nothing more is written")
    }

    public var description: String {
        switch code {
        case .missing: return reason
        case .locked: return "the spool \(path) is \(reason)"
        case .permissionDenied: return "permission denied: \(path)"
        default: return "\(path): \(reason)"
        }
    }
}

/// A part of a spool that was left out when reading it: a torn last line, a line that does not parse,
/// or an entry that is not a regular file of the spool's owner.
public struct SpoolProblem: Sendable, Hashable, CustomStringConvertible {
    /// What was left out, and why.
    public enum Kind: Sendable, Hashable {
        /// The last line has no line end: the writer stopped mid-line (a crash). Never sent.
        case tornLine
        /// The line is not valid line protocol. Never sent.
        case corruptLine(String)
        /// The entry is not a regular file owned by the spool's owner (a symbolic link, a directory, a
        /// FIFO, another user's file), or it could not be read. Never followed, read or removed.
        case skippedEntry(String)
    }

    /// The file's name in the spool.
    public var file: String
    /// Byte offset of the line in the file.
    public var offset: Int
    /// What was left out, and why.
    public var kind: Kind

    package init(file: String, offset: Int, kind: Kind) {
        self.file = file
        self.offset = offset
        self.kind = kind
    }

    public var description: String {
        switch kind {
        case .tornLine: return "\(file) at byte \(offset): torn last line left out"
        case .corruptLine(let reason): return "\(file) at byte \(offset): corrupt line left out (\(reason))"
        case .skippedEntry(let reason): return "\(file): skipped (\(reason))"
        }
    }
}
