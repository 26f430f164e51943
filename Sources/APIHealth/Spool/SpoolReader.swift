import Foundation
import LineProtocol

/// Reads a spool directory without taking its lock: what `influx-tail` prints.
///
/// ```swift
/// let reader = try SpoolReader(directory: URL(fileURLWithPath: "/var/lib/apihealth/checkout"))
/// for segment in try reader.segments() {
///     for line in segment.lines { print(String(decoding: line, as: UTF8.self)) }
/// }
/// ```
public struct SpoolReader: Sendable {
    public let directory: URL

    /// Segment files: `<sequence>.lp` sealed, `<sequence>.open.lp` still being appended to.
    static let sealedSuffix = ".lp"
    static let openSuffix = ".open.lp"

    public init(directory: URL) throws(SpoolError) {
        self.directory = directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else { throw .missing(directory: directory.path) }
        guard FileManager.default.isReadableFile(atPath: directory.path),
            FileManager.default.isExecutableFile(atPath: directory.path)
        else { throw .permissionDenied(path: directory.path) }
    }

    /// One segment file's complete lines, oldest first.
    public struct Segment: Sendable {
        public var name: String
        public var url: URL
        /// Still being appended to by the agent.
        public var isOpen: Bool
        /// Every complete line that parses, each without its line end.
        public var lines: [[UInt8]]
        /// Lines left out: a torn tail or corrupt lines.
        public var problems: [SpoolProblem]
        public var modified: Date?
    }

    /// The names of the segment files in send order.
    public func segmentNames() throws(SpoolError) -> [String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw .permissionDenied(path: directory.path)
        }
        return names.filter { $0.hasSuffix(Self.sealedSuffix) && !$0.hasPrefix(".") }.sorted()
    }

    /// Every segment, in send order.
    public func segments() throws(SpoolError) -> [Segment] {
        var segments: [Segment] = []
        for name in try segmentNames() {
            if let segment = try segment(named: name) { segments.append(segment) }
        }
        return segments
    }

    /// One segment; `nil` when it was removed meanwhile (acknowledged by the server).
    public func segment(named name: String) throws(SpoolError) -> Segment? {
        let url = directory.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            if FileManager.default.fileExists(atPath: url.path) { throw .permissionDenied(path: url.path) }
            return nil
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        let (lines, problems) = Self.completeLines(Array(data), file: name)
        return Segment(
            name: name, url: url, isOpen: name.hasSuffix(Self.openSuffix), lines: lines, problems: problems,
            modified: attributes?[.modificationDate] as? Date)
    }

    /// The complete, parseable lines of `bytes` (read from `file` at `baseOffset`); a tail without a line
    /// end and corrupt lines are reported with their byte offsets in the file.
    public static func completeLines(_ bytes: [UInt8], file: String, baseOffset: Int = 0) -> ([[UInt8]], [SpoolProblem]) {
        var lines: [[UInt8]] = []
        var problems: [SpoolProblem] = []
        bytes.withUnsafeBufferPointer { buffer in
            var ranges: [LineSplitter.Line] = []
            for line in LineSplitter(buffer) {
                if line.range.upperBound >= buffer.count {
                    if !line.range.isEmpty {
                        problems.append(SpoolProblem(file: file, offset: baseOffset + line.range.lowerBound, kind: .tornLine))
                    }
                    continue
                }
                ranges.append(line)
            }
            // Checking lines is the costly part of reading a large segment: spread it over the cores.
            let chunks = ranges.count >= 20_000 ? ProcessInfo.processInfo.activeProcessorCount : 1
            let verdicts = Locked([Int: LineParseError?]())
            // The buffer outlives concurrentPerform, which returns only when every chunk is done.
            let shared = ReadOnlyBytes(buffer: buffer, ranges: ranges)
            DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                let buffer = shared.buffer
                let ranges = shared.ranges
                let parser = LineParser()
                var local: [Int: LineParseError?] = [:]
                var index = chunk * ranges.count / chunks
                let end = (chunk + 1) * ranges.count / chunks
                while index < end {
                    let line = ranges[index]
                    do {
                        if try !parser.validateLine(UnsafeBufferPointer(rebasing: buffer[line.range]), lineNumber: line.number) {
                            local[index] = .some(nil)
                        }
                    } catch {
                        local[index] = .some(
                            error as? LineParseError ?? LineParseError(line: line.number, column: 1, reason: "\(error)"))
                    }
                    index += 1
                }
                verdicts.withLock { $0.merge(local) { first, _ in first } }
            }
            let skipped = verdicts.withLock { $0 }
            lines.reserveCapacity(ranges.count)
            for (index, line) in ranges.enumerated() {
                switch skipped[index] {
                case .none:
                    lines.append(Array(UnsafeBufferPointer(rebasing: buffer[line.range])))
                case .some(.some(let error)):
                    problems.append(
                        SpoolProblem(file: file, offset: baseOffset + line.range.lowerBound, kind: .corruptLine("\(error)")))
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
        let text = try? String(contentsOf: directory.appendingPathComponent(".precision"), encoding: .utf8)
        return text.flatMap { Precision(rawValue: $0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? .ns
    }

    /// A batch the server refused for good, with its reason.
    public struct RejectedBatch: Sendable {
        public var name: String
        public var lines: [[UInt8]]
        public var reason: String
        public var rejectedAt: Date?
    }

    /// The batches in `rejected/`, oldest first.
    public func rejected() throws(SpoolError) -> [RejectedBatch] {
        let folder = directory.appendingPathComponent("rejected")
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return [] }
        return names.filter { $0.hasSuffix(Self.sealedSuffix) }.sorted().map { name in
            let url = folder.appendingPathComponent(name)
            let bytes = FileManager.default.contents(atPath: url.path).map(Array.init) ?? []
            let stem = String(name.dropLast(Self.sealedSuffix.count))
            let reason = (try? String(contentsOf: folder.appendingPathComponent(stem + ".reason"), encoding: .utf8)) ?? ""
            let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
            return RejectedBatch(
                name: name, lines: Self.completeLines(bytes, file: name).0, reason: reason,
                rejectedAt: attributes?[.modificationDate] as? Date)
        }
    }
}

/// Bytes and line ranges read by several threads at once while their owner waits.
private struct ReadOnlyBytes: @unchecked Sendable {
    let buffer: UnsafeBufferPointer<UInt8>
    let ranges: [LineSplitter.Line]
}
