import Foundation
import LineProtocol

/// One batch of encoded lines, open (still filling) or sealed (ready to send).
struct PendingBatch {
    /// Sorts in send order; also the spool file's stem.
    var segment: String
    var bytes: [UInt8]
    var lineCount: Int
    var isSealed = false
    var firstLineAt: Duration
    var lastLineAt: Duration
    /// Bytes already written through to the spool file.
    var spooledBytes = 0
    var isSpoolSealed = false
    var attempts = 0
    var notBefore: Duration?
    var failingSince: Duration?
}

/// What the shipper should do next.
enum NextSend {
    case send(segment: String, bytes: [UInt8], lineCount: Int)
    /// Nothing to send before `deadline` (`nil`: until something is recorded).
    case wait(until: Duration?)
}

/// The pending lines: the open batch being filled, sealed batches waiting to be sent, the spool that
/// mirrors them on disk, and the counters. Every access goes through one lock; recording only
/// encodes into memory, never touching the disk or the network.
final class PendingBatches: Sendable {
    private struct State {
        var batches: [PendingBatch] = []
        var nextSequence: UInt64 = 1
        var pendingBytes = 0
        var metrics = AgentMetrics()
        var recentInstants: RecentInstants
        /// Reused for each sample's fields.
        var fieldScratch: [Point.Field] = []
        var isClosed = false
        var spool: SpoolDirectory?
        var spoolFailureLogged = false
    }

    private let state: Locked<State>
    private let batching: APIHealthConfiguration.Batching
    private let encoder: LineEncoder
    /// Signalled when a batch is sealed or something is recorded into an empty store.
    let wakeup = Wakeup()
    /// One write-through at a time, so no bytes are appended twice.
    private let writeThroughMutex = NSLock()

    init(batching: APIHealthConfiguration.Batching, encoder: LineEncoder, spool: SpoolDirectory?) {
        self.batching = batching
        self.encoder = encoder
        var initial = State(recentInstants: RecentInstants(precision: encoder.precision))
        initial.spool = spool
        self.state = Locked(initial)
    }

    // MARK: Recording

    /// Encodes `point` into the open batch. Returns `false` if it was refused or dropped (counted).
    @discardableResult
    func record(_ point: Point, now: Duration) -> Bool {
        append(now: now) { bytes, instants, _ throws(LineProtocolError) in
            try encoder.encode(point, into: &bytes) { seriesKey, timestamp in
                instants.claim(series: RecentInstants.seriesID(seriesKey), timestamp: timestamp)
            }
        }
    }

    /// Encodes one line of a prerendered series into the open batch, as ``record(_:now:)`` does.
    /// `makeFields` fills an emptied array that is kept between calls, so recording allocates nothing.
    @discardableResult
    func record(
        series: RequestSeries, timestamp: Timestamp, now: Duration, fields makeFields: (inout [Point.Field]) -> Void
    ) -> Bool {
        append(now: now) { bytes, instants, fields throws(LineProtocolError) in
            fields.removeAll(keepingCapacity: true)
            makeFields(&fields)
            return try encoder.encode(fields: fields, timestamp: timestamp, series: series.key, into: &bytes) { _, timestamp in
                instants.claim(series: series.id, timestamp: timestamp)
            }
        }
    }

    /// Counts a sample that could not become a line at all.
    func countInvalid() {
        state.withLock { $0.metrics.pointsInvalid += 1 }
    }

    /// Runs `encode` on the open batch's bytes (opening one if needed), then counts, seals and caps.
    private func append(
        now: Duration,
        _ encode: (inout [UInt8], inout RecentInstants, inout [Point.Field]) throws(LineProtocolError) -> LineEncoder.Repairs
    ) -> Bool {
        var wake = false
        let accepted = state.withLock { state -> Bool in
            if state.isClosed {
                state.metrics.pointsDropped += 1
                return false
            }
            if state.batches.last?.isSealed ?? true {
                let segment = String(format: "%020llu", state.nextSequence)
                state.nextSequence += 1
                // Room for a full batch and the line that overflows it, so a batch is never copied
                // while it grows (pages are only touched as lines are written).
                var bytes: [UInt8] = []
                bytes.reserveCapacity(min(batching.maximumBytes, 16 << 20) + 64 * 1_024)
                state.batches.append(PendingBatch(segment: segment, bytes: bytes, lineCount: 0, firstLineAt: now, lastLineAt: now))
                wake = true
            }
            let last = state.batches.count - 1
            // Moved out and back so the encoder appends to a uniquely referenced array.
            var bytes = state.batches[last].bytes
            state.batches[last].bytes = []
            let before = bytes.count
            let repairs: LineEncoder.Repairs
            do {
                repairs = try encode(&bytes, &state.recentInstants, &state.fieldScratch)
            } catch {
                state.batches[last].bytes = bytes
                // A declined timestamp: the series has no free instant near the point's time.
                if (error as? LineProtocolError) == .timestampDeclined { state.metrics.pointsDropped += 1 } else { state.metrics.pointsInvalid += 1 }
                if state.batches[last].lineCount == 0 { state.batches.removeLast() }
                return false
            }
            if !repairs.isEmpty { state.metrics.pointsRepaired += 1 }
            let added = bytes.count - before
            state.batches[last].bytes = bytes
            state.batches[last].lineCount += 1
            state.batches[last].lastLineAt = now
            state.pendingBytes += added
            state.metrics.pointsRecorded += 1
            if state.batches[last].lineCount >= batching.maximumLines || bytes.count >= batching.maximumBytes {
                state.batches[last].isSealed = true
                wake = true
            }
            if state.pendingBytes > batching.maximumPendingBytes { Self.dropOldest(&state, cap: batching.maximumPendingBytes) }
            return true
        }
        if wake { wakeup.signal() }
        return accepted
    }

    private static func dropOldest(_ state: inout State, cap: Int) {
        while state.pendingBytes > cap && state.batches.count > 1 {
            let dropped = state.batches.removeFirst()
            state.pendingBytes -= dropped.bytes.count
            state.metrics.pointsDropped += UInt64(dropped.lineCount)
            state.spool?.remove(dropped.segment)
        }
    }

    // MARK: Sealing and sending

    /// Seals the open batch if its debounce or maximum age has passed. Returns when it next falls due.
    func sealDue(now: Duration) -> Duration? {
        state.withLock { state -> Duration? in
            guard let last = state.batches.indices.last, !state.batches[last].isSealed else { return nil }
            let batch = state.batches[last]
            let due = min(batch.lastLineAt + batching.flushDelay, batch.firstLineAt + batching.maximumAge)
            if state.isClosed || now >= due {
                state.batches[last].isSealed = true
                return nil
            }
            return due
        }
    }

    /// Seals the open batch now (`flush()` and shutdown).
    func sealOpenBatch() {
        state.withLock { state in
            if let last = state.batches.indices.last { state.batches[last].isSealed = true }
        }
        wakeup.signal()
    }

    /// The oldest sealed batch if it may be sent at `now`, or how long to wait.
    func next(now: Duration, openDeadline: Duration?) -> NextSend {
        state.withLock { state -> NextSend in
            guard let head = state.batches.first, head.isSealed else { return .wait(until: openDeadline) }
            if let notBefore = head.notBefore, notBefore > now {
                return .wait(until: openDeadline.map { min($0, notBefore) } ?? notBefore)
            }
            return .send(segment: head.segment, bytes: head.bytes, lineCount: head.lineCount)
        }
    }

    /// The server stored the batch.
    func acknowledge(_ segment: String, sentBytes: Int, compressedBytes: Int) {
        state.withLock { state in
            state.metrics.batchesWritten += 1
            state.metrics.bytesBeforeGzip += UInt64(sentBytes)
            state.metrics.bytesAfterGzip += UInt64(compressedBytes)
            state.metrics.lastError = nil
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return }
            let batch = state.batches.remove(at: index)
            state.pendingBytes -= batch.bytes.count
            state.metrics.pointsWritten += UInt64(batch.lineCount)
            state.spool?.remove(segment)
        }
    }

    /// The server refused the batch for good: it moves to `rejected/` with `reason`.
    func reject(_ segment: String, reason: String, expired: Bool = false, count: Int? = nil) {
        state.withLock { state in
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return }
            let batch = state.batches.remove(at: index)
            state.pendingBytes -= batch.bytes.count
            let lines = UInt64(min(count ?? batch.lineCount, batch.lineCount))
            if expired { state.metrics.pointsExpired += lines } else { state.metrics.pointsRejected += lines }
            state.metrics.lastError = reason
            state.spool?.reject(segment, bytes: batch.bytes, reason: reason)
        }
    }

    /// Splits a batch into two halves on a line boundary (after a 413). `false` for a single line.
    func split(_ segment: String) -> Bool {
        state.withLock { state -> Bool in
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return false }
            let batch = state.batches[index]
            guard batch.lineCount > 1 else { return false }
            // Line ends inside string values are not line boundaries: count lines with the splitter.
            var boundaries: [Int] = []
            batch.bytes.withUnsafeBufferPointer { buffer in
                for line in LineSplitter(buffer) { boundaries.append(line.range.upperBound + 1) }
            }
            let cut = boundaries[boundaries.count / 2 - 1 + boundaries.count % 2]
            var first = batch
            first.segment = segment + "-1"
            first.bytes = Array(batch.bytes[..<cut])
            first.lineCount = boundaries.count / 2 + boundaries.count % 2
            first.spooledBytes = first.bytes.count
            first.isSpoolSealed = true
            var second = first
            second.segment = segment + "-2"
            second.bytes = Array(batch.bytes[cut...])
            second.lineCount = batch.lineCount - first.lineCount
            second.spooledBytes = second.bytes.count
            state.batches.replaceSubrange(index...index, with: [first, second])
            if let spool = state.spool {
                spool.remove(segment)
                try? spool.writeSealed(first.segment, bytes: first.bytes)
                try? spool.writeSealed(second.segment, bytes: second.bytes)
            }
            return true
        }
    }

    /// Schedules the batch again at `notBefore`. Returns `false` when it has been failing for longer
    /// than `retryLimit` (it is then set aside as expired).
    func scheduleRetry(_ segment: String, notBefore: Duration, now: Duration, error: String, retryLimit: Duration?) -> Bool {
        let keep = state.withLock { state -> Bool in
            state.metrics.retries += 1
            state.metrics.lastError = error
            guard let index = state.batches.firstIndex(where: { $0.segment == segment }) else { return true }
            state.batches[index].attempts += 1
            state.batches[index].notBefore = notBefore
            let since = state.batches[index].failingSince ?? now
            state.batches[index].failingSince = since
            if let retryLimit, now - since > retryLimit { return false }
            return true
        }
        if !keep { reject(segment, reason: "still failing after the retry limit: \(error)", expired: true) }
        return keep
    }

    /// The number of times the head batch has failed.
    func attempts(of segment: String) -> Int {
        state.withLock { state in state.batches.first(where: { $0.segment == segment })?.attempts ?? 0 }
    }

    // MARK: Shutdown

    /// Stops intake: later points are dropped and counted. The open batch is sealed.
    func close() {
        state.withLock { state in
            state.isClosed = true
            if let last = state.batches.indices.last { state.batches[last].isSealed = true }
        }
        wakeup.signal()
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// No batch is pending.
    var isDrained: Bool { state.withLock { $0.batches.isEmpty } }

    /// Retry waits of every batch end now (shutdown sends what is pending without waiting out backoff).
    func clearRetryWaits() {
        state.withLock { state in
            for index in state.batches.indices { state.batches[index].notBefore = nil }
        }
        wakeup.signal()
    }

    // MARK: Spool

    /// Writes what was recorded since the last call through to the spool files; seals files of sealed
    /// batches. Called every few milliseconds. The new bytes are copied out under the lock and written
    /// outside it, so recording never waits for the disk.
    func writeThrough(logFailure: (String) -> Void) {
        writeThroughMutex.lock()
        defer { writeThroughMutex.unlock() }
        typealias Work = (segment: String, bytes: [UInt8], end: Int, seals: Bool)
        let (spool, work) = state.withLock { state -> (SpoolDirectory?, [Work]) in
            guard let spool = state.spool else { return (nil, []) }
            var work: [Work] = []
            for batch in state.batches where batch.spooledBytes < batch.bytes.count || (batch.isSealed && !batch.isSpoolSealed) {
                work.append((batch.segment, Array(batch.bytes[batch.spooledBytes...]), batch.bytes.count, batch.isSealed))
            }
            return (spool, work)
        }
        guard let spool, !work.isEmpty else { return }
        var written: [(segment: String, end: Int, sealed: Bool)] = []
        var failure: SpoolError?
        for item in work {
            do {
                if !item.bytes.isEmpty { try spool.append(item.bytes[...], to: item.segment) }
                if item.seals { spool.seal(item.segment) }
                written.append((item.segment, item.end, item.seals))
            } catch {
                failure = error
            }
        }
        state.withLock { state in
            for item in written {
                guard let index = state.batches.firstIndex(where: { $0.segment == item.segment }) else { continue }
                state.batches[index].spooledBytes = max(state.batches[index].spooledBytes, item.end)
                if item.sealed { state.batches[index].isSpoolSealed = true }
            }
            if let failure {
                state.metrics.spoolWriteErrors += 1
                if !state.spoolFailureLogged {
                    state.spoolFailureLogged = true
                    logFailure("\(failure)")
                }
            }
        }
    }

    /// Loads the batches a previous run left in the spool, before any new data. Torn and corrupt lines
    /// are left out and returned.
    func restore(from reader: SpoolReader) throws(SpoolError) -> [SpoolProblem] {
        let segments = try reader.segments()
        return state.withLock { state -> [SpoolProblem] in
            var problems: [SpoolProblem] = []
            for segment in segments {
                problems += segment.problems
                let stem = String(segment.name.dropLast((segment.isOpen ? SpoolReader.openSuffix : SpoolReader.sealedSuffix).count))
                if let sequence = UInt64(stem.prefix { $0.isNumber }) { state.nextSequence = max(state.nextSequence, sequence + 1) }
                guard !segment.lines.isEmpty else {
                    state.spool?.remove(stem)
                    continue
                }
                var bytes: [UInt8] = []
                for line in segment.lines {
                    bytes += line
                    bytes.append(UInt8(ascii: "\n"))
                }
                if segment.isOpen || !segment.problems.isEmpty {
                    state.spool?.remove(stem)
                    try? state.spool?.writeSealed(stem, bytes: bytes)
                }
                state.batches.append(
                    PendingBatch(
                        segment: stem, bytes: bytes, lineCount: segment.lines.count, isSealed: true, firstLineAt: .zero,
                        lastLineAt: .zero, spooledBytes: bytes.count, isSpoolSealed: true))
                state.pendingBytes += bytes.count
            }
            state.metrics.spoolLinesLeftOut += UInt64(problems.count)
            if state.pendingBytes > batching.maximumPendingBytes { Self.dropOldest(&state, cap: batching.maximumPendingBytes) }
            return problems
        }
    }

    /// Writes what is left through and releases the spool (and its lock) after shutdown.
    func releaseSpool() {
        writeThrough { _ in }
        state.withLock { $0.spool = nil }
    }

    /// Every pending line, oldest first (for tests and diagnostics).
    func pendingBytes() -> [UInt8] {
        state.withLock { state in state.batches.flatMap(\.bytes) }
    }

    // MARK: Metrics

    var metrics: AgentMetrics {
        state.withLock { state in
            var metrics = state.metrics
            metrics.pendingLines = state.batches.reduce(0) { $0 + $1.lineCount }
            metrics.pendingBytes = state.pendingBytes
            return metrics
        }
    }
}

