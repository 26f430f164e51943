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
/// Every operation holds the directory's own lock, so files are written outside the pending store's
/// lock and recording never waits for the disk. A segment once removed is never written again, even
/// by an append that was already on its way.
final class SpoolDirectory: @unchecked Sendable {
    let root: URL
    let rejectedFolder: URL
    let fsyncWrites: Bool
    /// Bounds of the `rejected/` area; the oldest rejected batches are removed past them.
    let maximumRejectedBatches = 100
    let maximumRejectedBytes = 16 << 20
    private let lockDescriptor: Int32
    /// Open segment files by segment name.
    private var descriptors: [String: Int32] = [:]
    /// Serialises every file operation below.
    private let mutex = NSLock()
    /// Segments removed lately (acknowledged, dropped, rejected, split), oldest first.
    private var removed: Set<String> = []
    private var removedOrder: [String] = []

    init(options: SpoolOptions, precision: Precision) throws(SpoolError) {
        root = options.directory
        rejectedFolder = options.directory.appendingPathComponent("rejected")
        fsyncWrites = options.fsync
        for folder in [root, rejectedFolder] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw .cannotCreate(directory: folder.path, reason: "not a directory") }
                guard access(folder.path, R_OK | W_OK | X_OK) == 0 else { throw .permissionDenied(path: folder.path) }
                chmod(folder.path, 0o700)
            } else {
                do {
                    try FileManager.default.createDirectory(
                        at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    throw .cannotCreate(directory: folder.path, reason: "\(error.localizedDescription)")
                }
            }
        }
        let lockPath = root.appendingPathComponent(".lock").path
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .permissionDenied(path: lockPath) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw .locked(directory: root.path)
        }
        lockDescriptor = descriptor
        try? writeFileAtomically(root.appendingPathComponent(".precision").path, bytes: Array(precision.rawValue.utf8))
    }

    deinit {
        for descriptor in descriptors.values { close(descriptor) }
        flock(lockDescriptor, LOCK_UN)
        close(lockDescriptor)
    }

    static func openName(_ segment: String) -> String { segment + SpoolReader.openSuffix }
    static func sealedName(_ segment: String) -> String { segment + SpoolReader.sealedSuffix }

    private func path(_ file: String) -> String { root.appendingPathComponent(file).path }

    /// Appends `bytes` to the open file of `segment`, creating it (0600) on first use.
    func append(_ bytes: ArraySlice<UInt8>, to segment: String) throws(SpoolError) {
        mutex.lock()
        defer { mutex.unlock() }
        if removed.contains(segment) { return }
        let file = path(Self.openName(segment))
        var descriptor = descriptors[segment] ?? -1
        if descriptor < 0 {
            descriptor = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw .io(path: file, reason: String(cString: strerror(errno))) }
            descriptors[segment] = descriptor
        }
        try writeAll(descriptor, bytes, path: file)
        if fsyncWrites { fsync(descriptor) }
    }

    private func writeAll(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>, path: String) throws(SpoolError) {
        var failure: SpoolError?
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = .io(path: path, reason: String(cString: strerror(errno)))
                    return
                }
                offset += written
            }
        }
        if let failure { throw failure }
    }

    /// Closes the open file of `segment` and renames it to its sealed name.
    func seal(_ segment: String) {
        mutex.lock()
        defer { mutex.unlock() }
        if removed.contains(segment) { return }
        if let descriptor = descriptors.removeValue(forKey: segment) {
            if fsyncWrites { fsync(descriptor) }
            close(descriptor)
        }
        rename(path(Self.openName(segment)), path(Self.sealedName(segment)))
    }

    /// Removes every file of `segment` (acknowledged, or dropped).
    func remove(_ segment: String) {
        mutex.lock()
        defer { mutex.unlock() }
        removeLocked(segment)
    }

    private func removeLocked(_ segment: String) {
        if let descriptor = descriptors.removeValue(forKey: segment) { close(descriptor) }
        unlink(path(Self.openName(segment)))
        unlink(path(Self.sealedName(segment)))
        if removed.insert(segment).inserted {
            removedOrder.append(segment)
            // An append in flight is at most one write-through old: a short memory is enough.
            if removedOrder.count > 4_096 { removed.remove(removedOrder.removeFirst()) }
        }
    }

    /// Writes a sealed segment whole (after a split), atomically.
    func writeSealed(_ segment: String, bytes: [UInt8]) throws(SpoolError) {
        mutex.lock()
        defer { mutex.unlock() }
        try writeFileAtomically(path(Self.sealedName(segment)), bytes: bytes)
    }

    private func writeFileAtomically(_ target: String, bytes: [UInt8]) throws(SpoolError) {
        let temporary = target + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .io(path: temporary, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        try writeAll(descriptor, bytes[...], path: temporary)
        if fsyncWrites { fsync(descriptor) }
        guard rename(temporary, target) == 0 else { throw .io(path: target, reason: String(cString: strerror(errno))) }
    }

    /// Moves a batch the server refused for good to `rejected/` with the server's reason.
    func reject(_ segment: String, bytes: [UInt8], reason: String) {
        mutex.lock()
        defer { mutex.unlock() }
        removeLocked(segment)
        let stem = rejectedFolder.appendingPathComponent(segment).path
        try? writeFileAtomically(stem + ".reason", bytes: Array(reason.utf8))
        try? writeFileAtomically(stem + SpoolReader.sealedSuffix, bytes: bytes)
        trimRejected()
    }

    private func trimRejected() {
        guard var names = try? FileManager.default.contentsOfDirectory(atPath: rejectedFolder.path) else { return }
        names = names.filter { $0.hasSuffix(SpoolReader.sealedSuffix) }.sorted()
        var sizes = names.map { (try? FileManager.default.attributesOfItem(atPath: rejectedFolder.appendingPathComponent($0).path)[.size] as? Int) ?? 0 }
        while !names.isEmpty && (names.count > maximumRejectedBatches || sizes.reduce(0, +) > maximumRejectedBytes) {
            let stem = String(names.removeFirst().dropLast(SpoolReader.sealedSuffix.count))
            sizes.removeFirst()
            unlink(rejectedFolder.appendingPathComponent(stem + SpoolReader.sealedSuffix).path)
            unlink(rejectedFolder.appendingPathComponent(stem + ".reason").path)
        }
    }
}
