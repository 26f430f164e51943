import LineProtocol

/// The slow work the batching state asks for, done by ``PendingBatches`` after it releases its lock:
/// gzip bodies, copies to `rejected/`, joins, splits and spool rounds. Each returns the event that
/// reports what it achieved, if it has one.
struct BatchWorker: Sendable {
    /// Makes the request bodies of batches.
    let compressor: BatchCompressor
    /// The spool directory (`nil` without one). Once released, it refuses every operation under its
    /// own lock (``SpoolDirectory/release()``).
    let spool: SpoolDirectory?

    init(compressor: BatchCompressor, spool: SpoolDirectory?) {
        self.compressor = compressor
        self.spool = spool
    }

    /// Lets go of the spool directory: its lock is given up and no later work touches its files.
    func releaseSpool() { spool?.release() }

    /// Does `work`, a body made in the caller's `workspace`; returns the event that reports what it
    /// achieved, if it has one (the rest is the caller's: a send, a wait, a body, a split, a report).
    func run(_ work: BatchingAction.Work, compressingIn workspace: GzipWorkspace?) -> BatchingEvent? {
        switch work {
        case .none, .send, .wait, .useBody, .split, .reportSpoolFailure, .lost:
            return nil
        case .join(let plan):
            return join(plan, spool: spool)
        case .makeBody(let segment, let lines, let shift):
            guard let made = compressor.body(of: shift?.apply(to: lines) ?? lines, keeping: workspace) else {
                return nil
            }
            return .bodyMade(
                segment: segment,
                body: made.body,
                linesClamped: made.linesClamped,
                restamped: shift != nil
            )
        case .writeRejected(let segment, let contents, let reason, let removesFile, let only):
            // Lines that cannot be unpacked from the body stay in their spool file, read again at the next start.
            guard let spool, let lines = contents.lines() else { return nil }
            do throws(SpoolError) {
                try spool.reject(
                    segment,
                    bytes: only.map { Self.lines(numbered: $0, of: lines) } ?? lines,
                    reason: reason,
                    removingSegment: removesFile
                )
                return nil
            } catch {
                return .spoolFailed(error)
            }
        case .writeSpool(let work):
            guard let spool else { return .spoolRoundFinished(SpoolProgress()) }
            return .spoolRoundFinished(SpoolWriter.write(work, to: spool))
        }
    }

    /// Joins the batches of `plan`: their lines (unpacked from bodies where only they hold them) into
    /// one, written to the spool as a sealed file before the sources' files go.
    private func join(_ plan: MergePlan, spool: SpoolDirectory?) -> BatchingEvent {
        var lines: [UInt8]? = []
        lines?.reserveCapacity(plan.lineBytes)
        for contents in plan.contents {
            // Lines that cannot be unpacked: the head goes as it is.
            guard let batchLines = contents.lines() else {
                lines = nil
                break
            }
            lines? += batchLines
        }
        var written = false
        var failure: SpoolError?
        if let lines, let spool {
            do throws(SpoolError) {
                try spool.writeSealed(plan.segment, bytes: lines)
                written = true
            } catch {
                failure = error
            }
        }
        return .joined(plan, lines: lines, written: written, failure: failure)
    }

    /// Cuts batch `segment` (`lineCount` lines of `contents`) in halves on a line boundary and writes
    /// them to the spool before the batch's own file goes; `nil` for a single line, or lines that
    /// cannot be unpacked.
    func split(
        _ segment: String,
        contents: BatchContents,
        lineCount: Int,
        for destination: DestinationID
    ) -> BatchingEvent? {
        guard let lines = contents.lines(), let halves = SplitHalves(lines, count: lineCount) else { return nil }
        let names = SegmentName.halves(of: segment)
        var written = false
        var failure: SpoolError?
        if let spool {
            do throws(SpoolError) {
                try spool.writeSealed(names.first, bytes: halves.first)
                do throws(SpoolError) {
                    try spool.writeSealed(names.second, bytes: halves.second)
                } catch {
                    // Not half of the batch twice on disk: the whole batch stays there.
                    spool.remove(names.first)
                    throw error
                }
                written = true
            } catch {
                failure = error
            }
        }
        return .split(segment: segment, destination, halves: halves, names: names, written: written, failure: failure)
    }

    /// The lines of `lines` whose numbers (from 1) `numbered` holds.
    private static func lines(numbered: [Int: String], of lines: [UInt8]) -> [UInt8] {
        var kept: [UInt8] = []
        var number = 0
        lines.withUnsafeBufferPointer { buffer in
            for line in LineSplitter(buffer) {
                number += 1
                if numbered[number] != nil {
                    kept += buffer[line.range]
                    kept.append(UInt8(ascii: "\n"))
                }
            }
        }
        return kept
    }
}
