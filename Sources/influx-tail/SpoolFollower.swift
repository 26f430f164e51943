import APIHealth
import Foundation
import LineProtocol

/// Reads the complete lines added to a spool since the last poll, following segments through their
/// rename when sealed and forgetting them when removed.
struct SpoolFollower {
    let reader: SpoolReader
    /// Bytes of complete lines already read, by segment stem (the name without its suffix).
    private var consumed: [String: Int] = [:]
    /// Segments seen by the last poll.
    private(set) var segmentCount = 0

    init(reader: SpoolReader) {
        self.reader = reader
    }

    struct Poll {
        var lines: [[UInt8]] = []
        var problems: [SpoolProblem] = []
    }

    static func stem(_ name: String) -> String {
        if name.hasSuffix(".open.lp") { return String(name.dropLast(".open.lp".count)) }
        return String(name.dropLast(".lp".count))
    }

    /// Entries already reported as skipped, so following reports each once.
    private var reportedSkips: Set<String> = []

    mutating func poll(reportingTornTails: Bool) throws -> Poll {
        let names: [String]
        do {
            names = try reader.segmentNames()
        } catch {
            throw TailFailure(message: "\(error)")
        }
        var result = Poll()
        var seen = Set<String>()
        for name in names {
            let stem = Self.stem(name)
            seen.insert(stem)
            let offset = consumed[stem] ?? 0
            let read: SpoolReader.SegmentBytes
            do {
                read = try reader.bytes(ofSegment: name, from: offset)
            } catch {
                throw TailFailure(message: "\(error)")
            }
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
                if reportingTornTails && !bytes.isEmpty && !name.hasSuffix(".open.lp") {
                    result.problems.append(SpoolProblem(file: name, offset: offset, kind: .tornLine))
                }
                continue
            }
            let complete = Array(bytes[...lastNewline])
            let (lines, problems) = SpoolReader.completeLines(complete, file: name, baseOffset: offset)
            result.lines += lines
            result.problems += problems
            if reportingTornTails && lastNewline + 1 < bytes.count && !name.hasSuffix(".open.lp") {
                result.problems.append(SpoolProblem(file: name, offset: offset + lastNewline + 1, kind: .tornLine))
            }
            consumed[stem] = offset + lastNewline + 1
        }
        for stem in consumed.keys where !seen.contains(stem) { consumed[stem] = nil }
        segmentCount = names.count
        return result
    }
}

/// `--measurement` and `--where` filters.
struct LineFilter {
    var measurement: String?
    var tags: [(String, String)]

    init(measurement: String?, tags: [String]) {
        self.measurement = measurement
        self.tags = tags.map { filter in
            let parts = filter.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    var isEmpty: Bool { measurement == nil && tags.isEmpty }

    func matches(_ line: [UInt8]) -> Bool {
        if isEmpty { return true }
        guard let point = try? LineParser().parseLine(line) else { return false }
        return matches(point)
    }

    func matches(_ point: Point) -> Bool {
        if let measurement, point.measurement != measurement { return false }
        return tags.allSatisfy { point.tag($0.0) == $0.1 }
    }
}
