#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls the spool makes, relative to an open directory, so that tests can make any one of
/// them fail. Each returns what the system call returns and sets `errno` on failure.
protocol SpoolFileSystem: Sendable {
    func openat(_ directory: Int32, _ name: String, _ flags: Int32, _ mode: mode_t) -> Int32
    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int
    func ftruncate(_ descriptor: Int32, _ length: Int) -> Int32
    func fsync(_ descriptor: Int32) -> Int32
    func close(_ descriptor: Int32) -> Int32
    func renameat(_ directory: Int32, _ from: String, _ to: String) -> Int32
    func unlinkat(_ directory: Int32, _ name: String) -> Int32
    func mkdirat(_ directory: Int32, _ name: String, _ mode: mode_t) -> Int32
}

/// The real system calls.
struct SystemFileSystem: SpoolFileSystem {
    func openat(_ directory: Int32, _ name: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
        #if canImport(Darwin)
        Darwin.openat(directory, name, flags, mode)
        #else
        Glibc.openat(directory, name, flags, mode)
        #endif
    }

    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        #if canImport(Darwin)
        return Darwin.write(descriptor, base, bytes.count)
        #else
        return Glibc.write(descriptor, base, bytes.count)
        #endif
    }

    func ftruncate(_ descriptor: Int32, _ length: Int) -> Int32 {
        #if canImport(Darwin)
        Darwin.ftruncate(descriptor, off_t(length))
        #else
        Glibc.ftruncate(descriptor, off_t(length))
        #endif
    }

    func fsync(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
        Darwin.fsync(descriptor)
        #else
        Glibc.fsync(descriptor)
        #endif
    }

    func close(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
        Darwin.close(descriptor)
        #else
        Glibc.close(descriptor)
        #endif
    }

    func renameat(_ directory: Int32, _ from: String, _ to: String) -> Int32 {
        #if canImport(Darwin)
        Darwin.renameat(directory, from, directory, to)
        #else
        Glibc.renameat(directory, from, directory, to)
        #endif
    }

    func unlinkat(_ directory: Int32, _ name: String) -> Int32 {
        #if canImport(Darwin)
        Darwin.unlinkat(directory, name, 0)
        #else
        Glibc.unlinkat(directory, name, 0)
        #endif
    }

    func mkdirat(_ directory: Int32, _ name: String, _ mode: mode_t) -> Int32 {
        #if canImport(Darwin)
        Darwin.mkdirat(directory, name, mode)
        #else
        Glibc.mkdirat(directory, name, mode)
        #endif
    }
}

/// `lstat`-like facts about a directory entry, never following a link.
struct EntryStatus {
    var type: mode_t
    var permissions: mode_t
    var owner: uid_t
    var size: Int
    var modified: Double

    var isRegularFile: Bool { type == S_IFREG }
    var isDirectory: Bool { type == S_IFDIR }

    var kindDescription: String {
        switch type {
        case S_IFLNK: return "a symbolic link"
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        case S_IFCHR, S_IFBLK: return "a device"
        case S_IFREG: return "a regular file"
        default: return "not a regular file"
        }
    }

    init(_ status: stat) {
        type = status.st_mode & S_IFMT
        permissions = status.st_mode & 0o7777
        owner = status.st_uid
        size = Int(status.st_size)
        #if canImport(Darwin)
        modified = Double(status.st_mtimespec.tv_sec) + Double(status.st_mtimespec.tv_nsec) / 1e9
        #else
        modified = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
        #endif
    }

    /// The entry `name` of `directory` (`AT_FDCWD` for a path), without following a link.
    static func of(_ name: String, in directory: Int32 = AT_FDCWD) -> EntryStatus? {
        var status = stat()
        guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return EntryStatus(status)
    }

    /// The file behind an open descriptor.
    static func of(descriptor: Int32) -> EntryStatus? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        return EntryStatus(status)
    }
}

/// The text of the last system error.
func systemError(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// The names in an open directory (without `.` and `..`); `nil` if it cannot be listed.
func directoryEntries(_ directory: Int32) -> [String]? {
    let copy = dup(directory)
    guard copy >= 0 else { return nil }
    guard let stream = fdopendir(copy) else {
        close(copy)
        return nil
    }
    defer { closedir(stream) }
    rewinddir(stream)
    var names: [String] = []
    while let entry = readdir(stream) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
            pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Reads a whole regular file of `directory` from `offset`, refusing links and anything that is not a
/// regular file owned by `owner` (nil: anyone), or larger than `limit` bytes. Never blocks on a FIFO.
enum SafeRead {
    enum Outcome {
        case bytes([UInt8], EntryStatus)
        case missing
        case skipped(String)
        case failed(String)
    }

    static func read(
        _ name: String,
        in directory: Int32,
        from offset: Int = 0,
        owner: uid_t?,
        atMost limit: Int = .max
    ) -> Outcome {
        let descriptor = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { return .missing }
            if code == ELOOP || code == EMLINK { return .skipped("a symbolic link") }
            if code == EACCES || code == EPERM { return .failed("permission denied") }
            return .failed(systemError(code))
        }
        defer { close(descriptor) }
        guard let status = EntryStatus.of(descriptor: descriptor) else { return .failed(systemError()) }
        guard status.isRegularFile else { return .skipped(status.kindDescription) }
        if let owner, status.owner != owner {
            return .skipped("owned by uid \(status.owner), not by the spool's owner")
        }
        guard status.size <= limit else { return .skipped("larger than \(limit) bytes") }
        guard offset < status.size else { return .bytes([], status) }
        var bytes = [UInt8](repeating: 0, count: status.size - offset)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { raw in
                pread(descriptor, raw.baseAddress! + filled, raw.count - filled, off_t(offset + filled))
            }
            if count < 0 {
                if errno == EINTR { continue }
                return .failed(systemError())
            }
            if count == 0 { break }
            filled += count
        }
        bytes.removeSubrange(filled...)
        return .bytes(bytes, status)
    }
}
