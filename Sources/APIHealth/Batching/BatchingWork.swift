import LineProtocol

/// What the shipper should do next.
enum NextSend: Equatable {
    /// Send the batch `segment`: its gzip body if made already.
    case send(segment: String, body: [UInt8]?, lineCount: Int, lineBytes: Int)
    /// Nothing to send before `deadline` (`nil`: until something is recorded).
    case wait(until: Duration?)
}

/// Sealed batches at the head to join into one, within the batch limits.
struct MergePlan: Equatable {
    /// The batches joined, oldest first.
    var sources: [String]
    /// Their lines, in the same order.
    var contents: [BatchContents]
    /// The name of the joined batch: its last source's sequence first, so it keeps its place.
    var segment: String
    var lineCount: Int
    var lineBytes: Int

    static func == (lhs: MergePlan, rhs: MergePlan) -> Bool { lhs.segment == rhs.segment && lhs.sources == rhs.sources }
}

/// The two halves of a batch the server found too large, made outside the lock.
struct SplitHalves {
    var first: [UInt8]
    var firstLines: Int
    var second: [UInt8]
    var secondLines: Int

    /// Cuts `lines` (whole lines, `count` of them) in two on a line boundary; `nil` for a single line.
    init?(_ lines: [UInt8], count: Int) {
        guard count > 1 else { return nil }
        // Line ends inside string values are not line boundaries: count lines with the splitter.
        var boundaries: [Int] = []
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) { boundaries.append(line.range.upperBound + 1) }
        }
        guard boundaries.count > 1 else { return nil }
        let firstCount = boundaries.count / 2 + boundaries.count % 2
        let cut = min(boundaries[firstCount - 1], lines.count)
        first = Array(lines[..<cut])
        firstLines = firstCount
        second = Array(lines[cut...])
        secondLines = count - firstCount
    }
}

/// Writing through to the spool: what the spool worker writes, seals and removes in one round.
struct SpoolWork {
    struct Append {
        var segment: String
        /// The bytes recorded since the last round (empty when the round only seals the file), copied:
        /// a slice would share the open batch's buffer, which the next line recorded would then copy.
        var bytes: [UInt8]
        /// Where the batch's bytes end once they are written.
        var end: Int
        var seals: Bool
    }

    var appends: [Append] = []
    /// Files of batches delivered, dropped, merged or split: removed after the appends.
    var removals: [String] = []

    var isEmpty: Bool { appends.isEmpty && removals.isEmpty }
}

/// What one round of the spool worker achieved.
struct SpoolProgress {
    var written: [(segment: String, end: Int, sealed: Bool)] = []
    var failures: [SpoolError] = []
}
