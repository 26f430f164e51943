import Foundation
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a spool directory without taking its lock: what `influx-tail` prints.
///
/// ```swift
/// let reader = try SpoolReader(directory: URL(fileURLWithPath: "/var/lib/apihealth/checkout"))
/// for segment in try reader.segments() {
///     for line in segment.lines { print(String(decoding: line, as: UTF8.self)) }
/// }
/// ```
public struct SpoolReader: Sendable {
    /// The spool directory read.
    public let directory: URL
    private let handle: DirectoryHandle
    /// Only regular files of this user are read: the directory's owner.
    private let owner: uid_t

    /// Opens the spool directory for reading. A symbolic link at `directory` is refused, not followed.
    ///
    /// - Parameter directory: the spool directory.
    /// - Throws: ``SpoolError`` with code `missing`, `permissionDenied` or `unsafe`.
    public init(directory: URL) throws(SpoolError) {
        self.directory = directory
        let path = directory.path
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT: throw .missing(directory: path)
            case EACCES, EPERM: throw .permissionDenied(path: path)
            case ELOOP:
                throw SpoolError(code: .unsafe, path: path, reason: "is a symbolic link; give the directory itself")
            case ENOTDIR:
                if EntryStatus.of(path) == nil { throw .missing(directory: path) }
                throw SpoolError(code: .unsafe, path: path, reason: "is not a directory")
            default: throw .io(path: path, reason: systemError(code))
            }
        }
        handle = DirectoryHandle(descriptor: descriptor)
        guard let status = EntryStatus.of(descriptor: descriptor) else { throw .io(path: path, reason: systemError()) }
        owner = status.owner
        guard directoryEntries(descriptor) != nil else { throw .permissionDenied(path: path) }
    }

    /// A reader over an already opened and checked directory.
    init(duplicating descriptor: Int32, directory: URL, owner: uid_t) throws(SpoolError) {
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw .io(path: directory.path, reason: systemError()) }
        self.directory = directory
        self.handle = DirectoryHandle(descriptor: copy)
        self.owner = owner
    }

    /// One segment file's complete lines, oldest first.
    public struct Segment: Sendable {
        /// The file's name in the spool.
        public var name: String
        /// The file's location.
        public var url: URL
        /// Still being appended to by the agent.
        public var isOpen: Bool
        /// Every complete line that parses, each without its line end.
        public var lines: [[UInt8]]
        /// Lines left out: a torn tail or corrupt lines; or why the whole entry was skipped.
        public var problems: [SpoolProblem]
        /// When the file was last written.
        public var modified: Date?
        /// The entry is not a regular file of the spool's owner (a link, a directory, a FIFO) or could
        /// not be read: it was not read and is never removed.
        public var isSkipped = false
    }

    /// The names of the segment files in send order.
    ///
    /// - Throws: ``SpoolError`` when the directory cannot be listed.
    package func segmentNames() throws(SpoolError) -> [String] {
        guard let names = directoryEntries(handle.descriptor) else { throw .permissionDenied(path: directory.path) }
        // Only names the agent gives (see ``SegmentName``): another file is never read, sent or removed.
        return names.filter { SegmentName.parse(fileName: $0) != nil }.sorted()
    }

    /// Every segment, in send order.
    ///
    /// - Returns: The segments, oldest first, each with its complete lines and what was left out.
    /// - Throws: ``SpoolError`` when the directory cannot be listed or a segment cannot be read.
    public func segments() throws(SpoolError) -> [Segment] {
        var segments: [Segment] = []
        for name in try segmentNames() {
            if let segment = try segment(named: name) { segments.append(segment) }
        }
        return segments
    }

    /// What reading a segment file found.
    package enum SegmentBytes: Sendable {
        /// The file's bytes from the offset asked for.
        case bytes([UInt8])
        /// The file is gone (acknowledged by the server meanwhile).
        case removed
        /// The entry is not a regular file of the spool's owner: never read.
        case skipped(SpoolProblem)
    }

    /// Reads the segment file `name` from `offset` without following a link or blocking on a FIFO.
    ///
    /// - Parameters:
    ///   - name: the file's name in the spool directory.
    ///   - offset: the first byte to read.
    /// - Throws: ``SpoolError`` with code `permissionDenied` when the file cannot be read.
    package func bytes(ofSegment name: String, from offset: Int = 0) throws(SpoolError) -> SegmentBytes {
        switch SafeRead.read(name, in: handle.descriptor, from: offset, owner: owner) {
        case .bytes(let bytes, _): return .bytes(bytes)
        case .missing: return .removed
        case .skipped(let reason): return .skipped(SpoolProblem(file: name, offset: 0, kind: .skippedEntry(reason)))
        case .failed(let reason):
            if reason == "permission denied" {
                throw .permissionDenied(path: directory.appendingPathComponent(name).path)
            }
            return .skipped(SpoolProblem(file: name, offset: 0, kind: .skippedEntry(reason)))
        }
    }

    /// One segment; `nil` when it was removed meanwhile (acknowledged by the server).
    ///
    /// - Parameter name: the file's name in the spool directory.
    /// - Throws: ``SpoolError`` with code `permissionDenied` when the file cannot be read.
    package func segment(named name: String) throws(SpoolError) -> Segment? {
        let url = directory.appendingPathComponent(name)
        let isOpen = name.hasSuffix(SegmentName.openSuffix)
        switch SafeRead.read(name, in: handle.descriptor, owner: owner) {
        case .missing:
            return nil
        case .skipped(let reason), .failed(let reason):
            if reason == "permission denied" { throw .permissionDenied(path: url.path) }
            return Segment(
                name: name,
                url: url,
                isOpen: isOpen,
                lines: [],
                problems: [SpoolProblem(file: name, offset: 0, kind: .skippedEntry(reason))],
                modified: nil,
                isSkipped: true
            )
        case .bytes(let bytes, let status):
            let (lines, problems) = Self.completeLines(bytes, file: name)
            return Segment(
                name: name,
                url: url,
                isOpen: isOpen,
                lines: lines,
                problems: problems,
                modified: Date(timeIntervalSince1970: status.modified)
            )
        }
    }

    /// The complete, parseable lines of `bytes` (read from `file` at `baseOffset`); a tail without a line
    /// end and corrupt lines are reported with their byte offsets in the file.
    package static func completeLines(
        _ bytes: [UInt8],
        file: String,
        baseOffset: Int = 0
    ) -> ([[UInt8]], [SpoolProblem]) {
        var lines: [[UInt8]] = []
        var problems: [SpoolProblem] = []
        bytes.withUnsafeBufferPointer { buffer in
            var ranges: [Range<Int>] = []
            // A quote that is never closed would carry the next lines into one string: a line that
            // spans line ends and does not parse costs its first physical line only.
            var start = 0
            splitting: while start < buffer.count {
                for part in LineSplitter(UnsafeBufferPointer(rebasing: buffer[start...])) {
                    let line = (
                        number: part.number, range: (part.range.lowerBound + start)..<(part.range.upperBound + start)
                    )
                    let torn = line.range.upperBound >= buffer.count
                    if let newline = buffer[line.range].firstIndex(of: UInt8(ascii: "\n")) {
                        let whole = UnsafeBufferPointer(rebasing: buffer[line.range])
                        if torn || (try? LineParser().validateLine(whole)) == nil {
                            let first = UnsafeBufferPointer(rebasing: buffer[line.range.lowerBound..<newline])
                            var reason = "unterminated string value"
                            do {
                                _ = try LineParser().validateLine(first)
                            } catch {
                                reason = "\(error)"
                            }
                            problems.append(
                                SpoolProblem(
                                    file: file,
                                    offset: baseOffset + line.range.lowerBound,
                                    kind: .corruptLine(reason)
                                )
                            )
                            start = newline + 1
                            continue splitting
                        }
                    }
                    if torn {
                        if !line.range.isEmpty {
                            problems.append(
                                SpoolProblem(file: file, offset: baseOffset + line.range.lowerBound, kind: .tornLine)
                            )
                        }
                        continue
                    }
                    ranges.append(line.range)
                }
                break
            }
            // Checking lines is the costly part of reading a large segment: spread it over the cores.
            let chunks = ranges.count >= 2_048 ? ProcessInfo.processInfo.activeProcessorCount : 1
            // Each chunk's verdicts go to a slot of its own, so the chunks share nothing they write. The
            // buffer and the slots outlive concurrentPerform, which returns only when every chunk is done.
            let verdictsByChunk = [[Int: LineParseError?]](unsafeUninitializedCapacity: chunks) { slots, initialized in
                let shared = ChunkWork(buffer: buffer, ranges: ranges, verdicts: slots.baseAddress!)
                DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                    let buffer = shared.buffer
                    let ranges = shared.ranges
                    let parser = LineParser()
                    var local: [Int: LineParseError?] = [:]
                    var index = chunk * ranges.count / chunks
                    let end = (chunk + 1) * ranges.count / chunks
                    while index < end {
                        let line = (number: index + 1, range: ranges[index])
                        do {
                            if try !parser.validateLine(
                                UnsafeBufferPointer(rebasing: buffer[line.range]),
                                lineNumber: line.number
                            ) {
                                local[index] = .some(nil)
                            }
                        } catch {
                            local[index] = .some(
                                error as? LineParseError
                                    ?? LineParseError(line: line.number, column: 1, reason: "\(error)")
                            )
                        }
                        index += 1
                    }
                    (shared.verdicts + chunk).initialize(to: local)
                }
                initialized = chunks
            }
            var skipped: [Int: LineParseError?] = [:]
            for verdicts in verdictsByChunk { skipped.merge(verdicts) { first, _ in first } }
            lines.reserveCapacity(ranges.count)
            for (index, line) in ranges.enumerated() {
                switch skipped[index] {
                case .none:
                    lines.append(Array(UnsafeBufferPointer(rebasing: buffer[line])))
                case .some(.some(let error)):
                    problems.append(
                        SpoolProblem(file: file, offset: baseOffset + line.lowerBound, kind: .corruptLine("\(error)"))
                    )
                case .some(.none):
                    break
                }
            }
            problems.sort { $0.offset < $1.offset }
        }
        return (lines, problems)
    }

    /// The precision of the spool's timestamps, as the agent recorded it (`ns` if unknown).
    public var precision: Precision {
        guard case .bytes(let bytes, _) = SafeRead.read(".precision", in: handle.descriptor, owner: owner) else {
            return .ns
        }
        return Precision(
            rawValue: String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        ) ?? .ns
    }

    /// A batch the server refused for good, with its reason.
    public struct RejectedBatch: Sendable {
        /// The batch's file name in `rejected/`.
        public var name: String
        /// The batch's lines, each without its line end.
        public var lines: [[UInt8]]
        /// What the server answered, or why the batch was set aside.
        public var reason: String
        /// When it was set aside.
        public var rejectedAt: Date?
    }

    /// The batches in `rejected/`, oldest first. Entries that are not regular files of the spool's
    /// owner are left out.
    ///
    /// - Returns: The refused batches with their reasons; empty when there is no `rejected/`.
    /// - Throws: ``SpoolError`` when `rejected/` is not a directory of the spool's owner.
    public func rejected() throws(SpoolError) -> [RejectedBatch] {
        let path = directory.appendingPathComponent("rejected").path
        let descriptor = openat(handle.descriptor, "rejected", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { return [] }
            if code == ELOOP { throw SpoolError(code: .unsafe, path: path, reason: "is a symbolic link") }
            throw .io(path: path, reason: systemError(code))
        }
        let folder = DirectoryHandle(descriptor: descriptor)
        guard let names = directoryEntries(folder.descriptor) else { return [] }
        return names.filter { SegmentName.parse(fileName: $0)?.isOpen == false }.sorted().compactMap { name in
            guard case .bytes(let bytes, let status) = SafeRead.read(name, in: folder.descriptor, owner: owner) else {
                return nil
            }
            let stem = String(name.dropLast(SegmentName.sealedSuffix.count))
            var reason = ""
            if case .bytes(let text, _) = SafeRead.read(stem + ".reason", in: folder.descriptor, owner: owner) {
                reason = String(decoding: text, as: UTF8.self)
            }
            return RejectedBatch(
                name: name,
                lines: Self.completeLines(bytes, file: name).0,
                reason: reason,
                rejectedAt: Date(timeIntervalSince1970: status.modified)
            )
        }
    }
}

/// An open directory, closed when the last reader holding it is gone.
private final class DirectoryHandle: Sendable {
    let descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}

/// Bytes and line ranges read by several threads at once while their owner waits, and a slot for
/// each chunk's verdicts, initialized by that chunk's thread alone.
private struct ChunkWork: @unchecked Sendable {
    let buffer: UnsafeBufferPointer<UInt8>
    let ranges: [Range<Int>]
    let verdicts: UnsafeMutablePointer<[Int: LineParseError?]>
}
