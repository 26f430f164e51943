/// Why the spool could not be opened or used.
public enum SpoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Another agent holds the directory's lock: one agent per spool directory.
    case locked(directory: String)
    /// The directory is missing and could not be created.
    case cannotCreate(directory: String, reason: String)
    /// The directory exists but cannot be read or written by this user.
    case permissionDenied(path: String)
    /// The directory does not exist (readers do not create it).
    case missing(directory: String)
    /// A file operation failed.
    case io(path: String, reason: String)

    public var description: String {
        switch self {
        case .locked(let directory):
            return "the spool \(directory) is in use by another agent (one agent per spool directory)"
        case .cannotCreate(let directory, let reason): return "cannot create the spool \(directory): \(reason)"
        case .permissionDenied(let path): return "permission denied: \(path)"
        case .missing(let directory): return "no spool directory at \(directory)"
        case .io(let path, let reason): return "\(path): \(reason)"
        }
    }
}

/// A part of a segment that was left out when reading it: a torn last line or a line that does not parse.
public struct SpoolProblem: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The last line has no line end: the writer stopped mid-line (a crash). Never sent.
        case tornLine
        /// The line is not valid line protocol. Never sent.
        case corruptLine(String)
    }

    public var file: String
    /// Byte offset of the line in the file.
    public var offset: Int
    public var kind: Kind

    public init(file: String, offset: Int, kind: Kind) {
        self.file = file
        self.offset = offset
        self.kind = kind
    }

    public var description: String {
        switch kind {
        case .tornLine: return "\(file) at byte \(offset): torn last line left out"
        case .corruptLine(let reason): return "\(file) at byte \(offset): corrupt line left out (\(reason))"
        }
    }
}
