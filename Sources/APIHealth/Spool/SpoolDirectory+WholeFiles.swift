import Foundation
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Files written whole, through a temporary file renamed over the name: sealed segments made by a split,
/// a join or the re-cut at start, and the copies of refused batches in `rejected/`.
extension SpoolDirectory {
    /// Writes a sealed segment whole (after a split or when re-batching), atomically.
    func writeSealed(_ segment: String, bytes: [UInt8]) throws(SpoolError) {
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { throw .released(directory: root.path) }
        try writeFileAtomically(rootDescriptor, Self.sealedName(segment), bytes: bytes)
    }

    /// Writes `name` in `directory` through a new temporary file renamed over it.
    func writeFileAtomically(_ directory: Int32, _ name: String, bytes: [UInt8]) throws(SpoolError) {
        let temporary = name + ".tmp"
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var descriptor = fileSystem.openat(directory, temporary, flags, 0o600)
        if descriptor < 0 && errno == EEXIST {
            // Left by a crash, or planted: the entry itself goes (a link is removed, never followed).
            _ = fileSystem.unlinkat(directory, temporary)
            descriptor = fileSystem.openat(directory, temporary, flags, 0o600)
        }
        guard descriptor >= 0 else { throw .io(path: path(temporary), reason: systemError()) }
        do throws(SpoolError) {
            try writeAll(descriptor, bytes[...], path: path(temporary))
            if fsyncWrites && fileSystem.fsync(descriptor) != 0 {
                throw .io(path: path(temporary), reason: "fsync: \(systemError())")
            }
        } catch {
            _ = fileSystem.close(descriptor)
            _ = fileSystem.unlinkat(directory, temporary)
            throw error
        }
        _ = fileSystem.close(descriptor)
        guard fileSystem.renameat(directory, temporary, name) == 0 else {
            let failure = SpoolError.io(path: path(name), reason: "rename: \(systemError())")
            _ = fileSystem.unlinkat(directory, temporary)
            throw failure
        }
        if fsyncWrites { try syncDirectory(directory) }
    }

    /// Copies a batch the server refused for good to `rejected/` with the server's reason, then removes
    /// it from the spool. When the copy cannot be written the segment stays where it is (and is sent
    /// again by the next start) and the error is thrown.
    func reject(_ segment: String, bytes: [UInt8], reason: String, removingSegment: Bool = true) throws(SpoolError) {
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { throw .released(directory: root.path) }
        try writeFileAtomically(rejectedDescriptor, SegmentName.sealedFile(segment), bytes: bytes)
        try writeFileAtomically(rejectedDescriptor, segment + ".reason", bytes: Array(reason.utf8))
        if removingSegment { removeLocked(segment) }
        trimRejected()
    }

    private func trimRejected() {
        guard var names = directoryEntries(rejectedDescriptor) else { return }
        names = names.filter { SegmentName.parse(fileName: $0)?.isOpen == false }.sorted()
        var sizes = names.map { EntryStatus.of($0, in: rejectedDescriptor)?.size ?? 0 }
        while !names.isEmpty && (names.count > maximumRejectedBatches || sizes.reduce(0, +) > maximumRejectedBytes) {
            let stem = String(names.removeFirst().dropLast(SegmentName.sealedSuffix.count))
            sizes.removeFirst()
            unlinkOwned(SegmentName.sealedFile(stem), in: rejectedDescriptor)
            unlinkOwned(stem + ".reason", in: rejectedDescriptor)
        }
    }
}
