import APIHealth
import Foundation

/// Reads the complete lines added to a spool since the last poll, following segments through their
/// rename when sealed and forgetting them when removed.
///
/// ```swift
/// var follower = SpoolFollower(reader: try SpoolReader(directory: spool))
/// let first = try follower.poll(reportingTornTails: true)   // every pending line
/// let next = try follower.poll(reportingTornTails: false)   // only what was added since
/// ```
package struct SpoolFollower: Sendable {
    package let reader: SpoolReader
    /// Bytes of complete lines already read, by segment stem (the name without its suffix).
    private var consumed: [String: Int] = [:]
    /// Segments seen by the last poll.
    package private(set) var segmentCount = 0

    package init(reader: SpoolReader) {
        self.reader = reader
    }

    /// What one poll found: complete lines, oldest first, and the lines or entries left out.
    package struct Poll: Sendable {
        package var lines: [[UInt8]] = []
        package var problems: [SpoolProblem] = []
    }

    static func stem(_ name: String) -> String {
        SegmentName.parse(fileName: name)?.stem ?? name
    }

    /// Entries already reported as skipped, so following reports each once.
    private var reportedSkips: Set<String> = []
    /// Whether a poll has run: segments the agent rewrites after that hold lines already read.
    private var polledOnce = false

    /// Whether a segment named `stem` is one the agent wrote from segments it already had: a backlog
    /// joined into one (`<last>-<sequence>`) or a batch split in two (`<stem>-1`, `<stem>-2`).
    static func isRewritten(_ stem: String) -> Bool { stem.contains("-") }

    /// The complete lines added since the last poll.
    ///
    /// - Parameter reportingTornTails: report a sealed segment's last line without a line end (while
    ///   following, a line may still be being written).
    /// - Throws: ``SpoolError`` when the directory cannot be listed or a segment cannot be read.
    package mutating func poll(reportingTornTails: Bool) throws(SpoolError) -> Poll {
        var result = Poll()
        try poll(reportingTornTails: reportingTornTails) { segment in
            result.lines += segment.lines
            result.problems += segment.problems
        }
        return result
    }

    /// The complete lines added since the last poll, handed over one segment at a time, so memory holds
    /// one segment's lines rather than the whole spool's.
    ///
    /// - Parameters:
    ///   - reportingTornTails: as in ``poll(reportingTornTails:)``.
    ///   - body: called with each segment's new lines and problems, in send order.
    /// - Throws: ``SpoolError`` when the directory cannot be listed or a segment cannot be read.
    package mutating func poll(reportingTornTails: Bool, segment body: (Poll) -> Void) throws(SpoolError) {
        let names = try reader.segmentNames()
        var seen = Set<String>()
        for name in names {
            var result = Poll()
            defer { if !result.lines.isEmpty || !result.problems.isEmpty { body(result) } }
            let stem = Self.stem(name)
            seen.insert(stem)
            let offset = consumed[stem] ?? 0
            // Its lines were read from the segments it was made of (removed since): not again.
            let repeatsLines = polledOnce && consumed[stem] == nil && Self.isRewritten(stem)
            let read = try reader.bytes(ofSegment: name, from: offset)
            let bytes: [UInt8]
            switch read {
            case .removed:
                continue
            case .skipped(let problem):
                if reportedSkips.insert(name).inserted { result.problems.append(problem) }
                continue
            case .bytes(let read):
                bytes = read
            }
            guard let lastNewline = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
                if reportingTornTails && !bytes.isEmpty && !name.hasSuffix(SegmentName.openSuffix) {
                    result.problems.append(SpoolProblem(file: name, offset: offset, kind: .tornLine))
                }
                continue
            }
            if repeatsLines {
                consumed[stem] = offset + lastNewline + 1
                continue
            }
            let complete = Array(bytes[...lastNewline])
            let (lines, problems) = SpoolReader.completeLines(complete, file: name, baseOffset: offset)
            result.lines += lines
            result.problems += problems
            if reportingTornTails && lastNewline + 1 < bytes.count && !name.hasSuffix(SegmentName.openSuffix) {
                result.problems.append(SpoolProblem(file: name, offset: offset + lastNewline + 1, kind: .tornLine))
            }
            consumed[stem] = offset + lastNewline + 1
        }
        for stem in consumed.keys where !seen.contains(stem) { consumed[stem] = nil }
        segmentCount = names.count
        polledOnce = true
    }
}
