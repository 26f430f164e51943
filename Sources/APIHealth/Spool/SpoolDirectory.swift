import Foundation
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The agent's side of the spool: one plain line-protocol file per batch, appended as points are
/// recorded, sealed when the batch is cut, removed when the server acknowledges it.
///
/// The directory is opened once and every file is reached through that descriptor, never through a
/// path that could be swapped. It must be a directory this user owns that group and others cannot
/// write, created by the agent or marked as a spool; files are opened with `O_NOFOLLOW`, new ones with
/// `O_CREAT | O_EXCL`, and an entry that is not a regular file of ours is never followed, read,
/// changed or removed.
///
/// Every operation holds the directory's own lock, which recording never takes: the pending batches'
/// spool worker writes, seals and removes files (``PendingBatches/writeThrough(logFailure:)``) and the
/// shipper writes joined, split and rejected batches, each outside the lock `record` takes, so
/// recording never waits for the disk. A segment once removed is never written again, even by an
/// append that was already on its way.
///
/// After shutdown the agent lets go of the spool (``release()``): its lock is given up at once, so
/// another agent may open the directory, and every later operation is refused under the same lock.
final class SpoolDirectory: @unchecked Sendable {
    /// Written when the agent creates (or adopts an empty) spool directory; a non-empty directory
    /// without it is never used.
    static let markerName = ".apihealth-spool"
    static let rejectedName = "rejected"

    let root: URL
    let fsyncWrites: Bool
    /// Bounds of the `rejected/` area; the oldest rejected batches are removed past them.
    let maximumRejectedBatches = 100
    let maximumRejectedBytes = 16 << 20
    let fileSystem: any SpoolFileSystem
    /// The user the spool belongs to (this process's effective user).
    let owner: uid_t
    let rootDescriptor: Int32
    let rejectedDescriptor: Int32
    private let lockDescriptor: Int32
    /// The state below is guarded by `mutex`, which also serialises every file operation.
    let mutex = Locked()
    /// Open segment files by segment name.
    private var descriptors: [String: Int32] = [:]
    /// Bytes known to be whole in each open segment file.
    private var lengths: [String: Int] = [:]
    /// Segments removed lately (acknowledged, dropped, rejected, split), oldest first.
    private var removed: Set<String> = []
    private var removedOrder: [String] = []
    /// Let go of (``release()``): every operation is refused, the lock is given up.
    private(set) var isReleased = false

    /// Opens (or creates) the spool directory and takes its lock.
    init(
        options: SpoolOptions,
        precision: Precision,
        fileSystem: any SpoolFileSystem = SystemFileSystem()
    ) throws(SpoolError) {
        root = options.directory
        fsyncWrites = options.fsync
        self.fileSystem = fileSystem
        owner = geteuid()
        let path = options.directory.path
        let (descriptor, created) = try Self.openRoot(path, owner: owner, fileSystem: fileSystem)
        rootDescriptor = descriptor
        var rejected: Int32 = -1
        var lock: Int32 = -1
        do throws(SpoolError) {
            try Self.checkMarker(descriptor, path: path, created: created, owner: owner, fileSystem: fileSystem)
            rejected = try Self.openRejected(descriptor, path: path, owner: owner, fileSystem: fileSystem)
            lock = fileSystem.openat(descriptor, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
            guard lock >= 0 else {
                let code = errno
                if code == ELOOP {
                    throw SpoolError(code: .unsafe, path: path + "/.lock", reason: "is a symbolic link")
                }
                throw SpoolError(code: .permissionDenied, path: path + "/.lock", reason: systemError(code))
            }
            guard let status = EntryStatus.of(descriptor: lock), status.isRegularFile, status.owner == owner else {
                throw SpoolError(code: .unsafe, path: path + "/.lock", reason: "is not a regular file of this user")
            }
            guard flock(lock, LOCK_EX | LOCK_NB) == 0 else { throw .locked(directory: path) }
        } catch {
            if lock >= 0 { _ = fileSystem.close(lock) }
            if rejected >= 0 { _ = fileSystem.close(rejected) }
            _ = fileSystem.close(descriptor)
            throw error
        }
        rejectedDescriptor = rejected
        lockDescriptor = lock
        // Only influx-tail reads it (to print times); a spool without it is still complete.
        try? writeFileAtomically(rootDescriptor, ".precision", bytes: Array(precision.rawValue.utf8))
    }

    deinit {
        closeFilesAndUnlock()
        _ = fileSystem.close(rejectedDescriptor)
        _ = fileSystem.close(rootDescriptor)
    }

    /// Lets go of the spool: closes the open segment files, gives up the directory's lock (another agent
    /// may open it now) and refuses every later operation (``SpoolError/Code/released``). Called once
    /// the agent's loops have ended; what they wrote stays for the next start.
    func release() {
        mutex.acquire()
        defer { mutex.release() }
        closeFilesAndUnlock()
        isReleased = true
    }

    /// Closes the open segment files and gives up the directory's lock, unless released already.
    private func closeFilesAndUnlock() {
        guard !isReleased else { return }
        for descriptor in descriptors.values { _ = fileSystem.close(descriptor) }
        descriptors.removeAll()
        lengths.removeAll()
        flock(lockDescriptor, LOCK_UN)
        _ = fileSystem.close(lockDescriptor)
    }

    /// A reader over the same open directory (what the agent restores from).
    func reader() throws(SpoolError) -> SpoolReader {
        try SpoolReader(duplicating: rootDescriptor, directory: root, owner: owner)
    }

    // MARK: Opening

    /// Opens `path` as a directory without following a link, creating it (0700) with its parents
    /// when missing. Refuses a directory of another user or one that group or others can write.
    private static func openRoot(
        _ path: String,
        owner: uid_t,
        fileSystem: any SpoolFileSystem
    ) throws(SpoolError) -> (Int32, Bool) {
        guard !path.isEmpty else {
            throw SpoolError(code: .cannotCreate, path: path, reason: "the spool path is empty")
        }
        var created = false
        if let status = EntryStatus.of(path) {
            if status.type == S_IFLNK {
                throw SpoolError(code: .unsafe, path: path, reason: "is a symbolic link; give the directory itself")
            }
            if !status.isDirectory {
                throw SpoolError(
                    code: .unsafe,
                    path: path,
                    reason: "exists and is \(status.kindDescription), not a directory"
                )
            }
        } else {
            let code = errno
            if code == ENOTDIR || code == ENOENT, let blocker = firstNonDirectoryAncestor(of: path) {
                throw .cannotCreate(directory: path, reason: "\(blocker) is a file, not a directory")
            }
            guard code == ENOENT else {
                if code == EACCES { throw .permissionDenied(path: path) }
                throw .cannotCreate(directory: path, reason: systemError(code))
            }
            let parent = (path as NSString).deletingLastPathComponent
            if !parent.isEmpty {
                do {
                    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
                } catch {
                    throw .cannotCreate(directory: path, reason: "its parent \(parent) cannot be created")
                }
            }
            if mkdir(path, 0o700) == 0 {
                created = true
            } else if errno != EEXIST {
                throw .cannotCreate(directory: path, reason: systemError())
            }
        }
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP {
                throw SpoolError(code: .unsafe, path: path, reason: "is a symbolic link; give the directory itself")
            }
            if code == ENOTDIR { throw SpoolError(code: .unsafe, path: path, reason: "is not a directory") }
            if code == EACCES { throw .permissionDenied(path: path) }
            throw .cannotCreate(directory: path, reason: systemError(code))
        }
        do throws(SpoolError) {
            try checkOwnership(descriptor, path: path, owner: owner)
        } catch {
            _ = fileSystem.close(descriptor)
            throw error
        }
        return (descriptor, created)
    }

    /// The first ancestor of `path` that exists and is not a directory.
    private static func firstNonDirectoryAncestor(of path: String) -> String? {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            var status = stat()
            guard stat(prefix, &status) == 0 else { return nil }
            if status.st_mode & S_IFMT != S_IFDIR { return prefix == path ? nil : prefix }
        }
        return nil
    }

    private static func checkOwnership(_ descriptor: Int32, path: String, owner: uid_t) throws(SpoolError) {
        guard let status = EntryStatus.of(descriptor: descriptor) else { throw .io(path: path, reason: systemError()) }
        if status.owner != owner {
            throw SpoolError(
                code: .unsafe,
                path: path,
                reason: "is owned by uid \(status.owner), not by this user (uid \(owner))"
            )
        }
        if status.permissions & 0o022 != 0 {
            throw SpoolError(
                code: .unsafe,
                path: path,
                reason:
                    "group or others can write it (mode \(String(status.permissions, radix: 8))); use a directory only this user can write"
            )
        }
        if status.permissions & 0o700 != 0o700 && owner != 0 { throw .permissionDenied(path: path) }
    }

    /// Whether the directory is a spool written by an APIHealth version from before the marker: only
    /// this user's `.lock`, `.precision` and `rejected/`, and segment files named as that version named
    /// them (`<20 digits>.lp`, `<20 digits>.open.lp`, `.precision.tmp`), all regular files of this user.
    /// Such a spool is adopted (marked) rather than refused.
    static func isEarlierSpool(_ descriptor: Int32, entries: [String], owner: uid_t) -> Bool {
        guard entries.contains(".lock"), entries.contains(".precision"),
            let rejected = EntryStatus.of(rejectedName, in: descriptor), rejected.isDirectory, rejected.owner == owner
        else { return false }
        func isSegmentName(_ name: String) -> Bool {
            guard let stem = SegmentName.parse(fileName: name)?.stem else { return false }
            return SegmentName.sequences(in: stem).count == 1
        }
        for name in entries where name != rejectedName {
            guard name == ".lock" || name == ".precision" || name == ".precision.tmp" || isSegmentName(name),
                let status = EntryStatus.of(name, in: descriptor), status.isRegularFile, status.owner == owner
            else { return false }
        }
        return true
    }

    private static func checkMarker(
        _ descriptor: Int32,
        path: String,
        created: Bool,
        owner: uid_t,
        fileSystem: any SpoolFileSystem
    ) throws(SpoolError) {
        if let status = EntryStatus.of(markerName, in: descriptor) {
            guard status.isRegularFile, status.owner == owner else {
                throw SpoolError(
                    code: .unsafe,
                    path: path + "/" + markerName,
                    reason: "is \(status.kindDescription) or not of this user"
                )
            }
            return
        }
        if !created {
            guard let entries = directoryEntries(descriptor) else { throw .permissionDenied(path: path) }
            if !entries.isEmpty && !isEarlierSpool(descriptor, entries: entries, owner: owner) {
                throw SpoolError(
                    code: .notASpool,
                    path: path,
                    reason:
                        "holds files but is not an APIHealth spool (no \(markerName) file); give an empty or new directory"
                )
            }
        }
        let marker = fileSystem.openat(
            descriptor,
            markerName,
            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
            0o600
        )
        guard marker >= 0 else { throw .io(path: path + "/" + markerName, reason: systemError()) }
        let text = Array("APIHealth spool: the agent reads, writes and removes files here\n".utf8)
        let written = text.withUnsafeBytes { fileSystem.write(marker, $0) }
        _ = fileSystem.close(marker)
        guard written == text.count else { throw .io(path: path + "/" + markerName, reason: "cannot write the marker") }
    }

    private static func openRejected(
        _ root: Int32,
        path: String,
        owner: uid_t,
        fileSystem: any SpoolFileSystem
    ) throws(SpoolError) -> Int32 {
        let folder = path + "/" + rejectedName
        if fileSystem.mkdirat(root, rejectedName, 0o700) != 0 && errno != EEXIST {
            throw .cannotCreate(directory: folder, reason: systemError())
        }
        let descriptor = fileSystem.openat(root, rejectedName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw SpoolError(code: .unsafe, path: folder, reason: "is a symbolic link") }
            if code == ENOTDIR { throw SpoolError(code: .unsafe, path: folder, reason: "is not a directory") }
            throw .io(path: folder, reason: systemError(code))
        }
        do throws(SpoolError) {
            try checkOwnership(descriptor, path: folder, owner: owner)
        } catch {
            _ = fileSystem.close(descriptor)
            throw error
        }
        return descriptor
    }

    // MARK: Segments

    static func openName(_ segment: String) -> String { SegmentName.openFile(segment) }
    static func sealedName(_ segment: String) -> String { SegmentName.sealedFile(segment) }

    func path(_ file: String) -> String { root.appendingPathComponent(file).path }

    /// Appends `bytes` to the open file of `segment`, creating it (0600) on first use. On failure the
    /// file is cut back to its last whole append (or removed), so it never holds half a chunk; see
    /// ``committedLength(of:)`` for where the next append must start.
    func append(_ bytes: ArraySlice<UInt8>, to segment: String) throws(SpoolError) {
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { throw .released(directory: root.path) }
        if removed.contains(segment) { return }
        let name = Self.openName(segment)
        var descriptor = descriptors[segment] ?? -1
        if descriptor < 0 {
            descriptor = fileSystem.openat(
                rootDescriptor,
                name,
                O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0o600
            )
            guard descriptor >= 0 else { throw .io(path: path(name), reason: systemError()) }
            descriptors[segment] = descriptor
            lengths[segment] = 0
            if fsyncWrites { try syncDirectory(rootDescriptor) }
        }
        let before = lengths[segment] ?? 0
        do throws(SpoolError) {
            try writeAll(descriptor, bytes, path: path(name))
            if fsyncWrites && fileSystem.fsync(descriptor) != 0 {
                throw .io(path: path(name), reason: "fsync: \(systemError())")
            }
        } catch {
            if fileSystem.ftruncate(descriptor, before) != 0 {
                // The file cannot be cut back: drop it; the batch is written again whole.
                _ = fileSystem.close(descriptor)
                descriptors[segment] = nil
                lengths[segment] = nil
                _ = fileSystem.unlinkat(rootDescriptor, name)
            }
            throw error
        }
        lengths[segment] = before + bytes.count
    }

    /// The bytes of `segment`'s open file that are whole on disk: where the next append starts.
    func committedLength(of segment: String) -> Int {
        mutex.acquire()
        defer { mutex.release() }
        return lengths[segment] ?? 0
    }

    func writeAll(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>, path: String) throws(SpoolError) {
        var failure: SpoolError?
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = fileSystem.write(descriptor, UnsafeRawBufferPointer(rebasing: raw[offset...]))
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = .io(path: path, reason: systemError())
                    return
                }
                if written == 0 {
                    failure = .io(path: path, reason: "no bytes written")
                    return
                }
                offset += written
            }
        }
        if let failure { throw failure }
    }

    func syncDirectory(_ descriptor: Int32) throws(SpoolError) {
        guard fileSystem.fsync(descriptor) == 0 else {
            throw .io(path: root.path, reason: "fsync of the directory: \(systemError())")
        }
    }

    /// Closes the open file of `segment` and renames it to its sealed name (with `fsync`, the rename is
    /// made durable too).
    func seal(_ segment: String) throws(SpoolError) {
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { throw .released(directory: root.path) }
        if removed.contains(segment) { return }
        if let descriptor = descriptors.removeValue(forKey: segment) { _ = fileSystem.close(descriptor) }
        lengths[segment] = nil
        guard fileSystem.renameat(rootDescriptor, Self.openName(segment), Self.sealedName(segment)) == 0 else {
            let code = errno
            if code == ENOENT, EntryStatus.of(Self.sealedName(segment), in: rootDescriptor)?.isRegularFile == true {
                return
            }
            throw .io(path: path(Self.sealedName(segment)), reason: "cannot seal: \(systemError(code))")
        }
        if fsyncWrites { try syncDirectory(rootDescriptor) }
    }

    /// Removes every file of `segment` (acknowledged, or dropped).
    func remove(_ segment: String) {
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { return }
        removeLocked(segment)
    }

    func removeLocked(_ segment: String) {
        if let descriptor = descriptors.removeValue(forKey: segment) { _ = fileSystem.close(descriptor) }
        lengths[segment] = nil
        unlinkOwned(Self.openName(segment), in: rootDescriptor)
        unlinkOwned(Self.sealedName(segment), in: rootDescriptor)
        if removed.insert(segment).inserted {
            removedOrder.append(segment)
            // An append in flight is at most one write-through old: a short memory is enough.
            if removedOrder.count > 4_096 { removed.remove(removedOrder.removeFirst()) }
        }
    }

    /// Removes `name` only if it is a regular file of ours.
    func unlinkOwned(_ name: String, in directory: Int32) {
        guard let status = EntryStatus.of(name, in: directory), status.isRegularFile, status.owner == owner else {
            return
        }
        _ = fileSystem.unlinkat(directory, name)
    }
}
