/// Takes up what an earlier run left in the spool: its lines, cut again into batches within the batch
/// limits (a long run of small batches is joined, a large segment is split), ahead of anything recorded.
/// Torn and corrupt lines and entries that are not regular files of ours are left out and reported.
///
/// ```swift
/// let (result, problems) = try SpoolRestore.restore(from: spool.reader(), into: spool, limits: limits)
/// ```
///
/// Re-cut batches are written before the segments they come from are removed: a crash in between
/// sends those lines twice, never loses them.
enum SpoolRestore {
    /// The batches taken up, for ``BatchingEvent/restored(_:)``.
    struct Result {
        var batches: [PendingBatch]
        /// The highest sequence in use, so new batches sort after these.
        var highestSequence: UInt64
        /// Lines left out (torn or corrupt).
        var linesLeftOut: Int
        /// Writing a re-cut batch failed (its sources stay on disk).
        var failures: [SpoolError]
    }

    /// Reads `reader`'s segments and cuts their lines again within `limits`, writing the new batches to
    /// `spool` and removing the segments they replace.
    ///
    /// - Parameters:
    ///   - reader: What the spool holds.
    ///   - spool: Where re-cut batches are written (`nil`: nowhere, for a read-only look).
    ///   - limits: The batch limits.
    /// - Returns: The batches, and what was left out.
    /// - Throws: ``SpoolError`` when the spool cannot be read.
    static func restore(
        from reader: SpoolReader,
        into spool: SpoolDirectory?,
        limits: APIHealthConfiguration.Batching
    ) throws(SpoolError) -> (Result, problems: [SpoolProblem]) {
        let segments = try reader.segments()
        var problems: [SpoolProblem] = []
        var sources: [(stem: String, lines: [[UInt8]], clean: Bool)] = []
        var highest: UInt64 = 0
        for segment in segments {
            problems += segment.problems
            guard let name = SegmentName.parse(fileName: segment.name) else { continue }
            highest = SegmentName.sequences(in: name.stem).reduce(highest, max)
            if segment.isSkipped { continue }
            sources.append((name.stem, segment.lines, !segment.isOpen && segment.problems.isEmpty))
        }
        let cuts = cut(sources.map(\.lines), within: limits)
        var batches: [PendingBatch] = []
        var replaced = Set<Int>()
        var kept = Set<Int>()
        var failures: [SpoolError] = []
        var nextSequence = highest + 1
        for cut in cuts {
            let source = sources[cut.source]
            var bytes: [UInt8] = []
            bytes.reserveCapacity(cut.lines.reduce(0) { $0 + $1.count + 1 })
            for line in cut.lines {
                bytes += line
                bytes.append(UInt8(ascii: "\n"))
            }
            var stem = source.stem
            let whole = cut.sources.count == 1 && cut.lines.count == source.lines.count
            if !(whole && source.clean) {
                stem = SegmentName.sequence(nextSequence)
                nextSequence += 1
                do throws(SpoolError) {
                    try spool?.writeSealed(stem, bytes: bytes)
                    replaced.formUnion(cut.sources)
                } catch {
                    failures.append(error)
                    kept.formUnion(cut.sources)
                }
            }
            batches.append(
                PendingBatch(sealed: stem, bytes: bytes, lineCount: cut.lines.count, awaiting: 1)
            )
        }
        for (index, source) in sources.enumerated()
        where (replaced.contains(index) || source.lines.isEmpty) && !kept.contains(index) {
            spool?.remove(source.stem)
        }
        let linesLeftOut = problems.filter { if case .skippedEntry = $0.kind { false } else { true } }.count
        let result = Result(
            batches: batches,
            highestSequence: nextSequence - 1,
            linesLeftOut: linesLeftOut,
            failures: failures
        )
        return (result, problems)
    }

    /// Every line of `sources`, in order, cut into batches within `limits`: each cut's lines, the source
    /// its first line comes from, and the sources it spans.
    static func cut(
        _ sources: [[[UInt8]]],
        within limits: APIHealthConfiguration.Batching
    ) -> [(lines: ArraySlice<[UInt8]>, source: Int, sources: Range<Int>)] {
        var all: [[UInt8]] = []
        var owner: [Int] = []
        for (index, lines) in sources.enumerated() {
            all += lines
            owner += Array(repeating: index, count: lines.count)
        }
        var cuts: [(lines: ArraySlice<[UInt8]>, source: Int, sources: Range<Int>)] = []
        var start = 0
        while start < all.count {
            var end = start
            var size = 0
            while end < all.count && end - start < limits.maximumLines
                && (end == start || size + all[end].count + 1 <= limits.maximumBytes)
            {
                size += all[end].count + 1
                end += 1
            }
            cuts.append((all[start..<end], owner[start], owner[start]..<(owner[end - 1] + 1)))
            start = end
        }
        return cuts
    }
}
