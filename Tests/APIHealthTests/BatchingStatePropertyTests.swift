import Foundation
import LineProtocol
import TestSupport
import Testing

@_spi(Benchmarking) @testable import APIHealth

/// The batching state machine driven alone, with random sequences of events and no disk or network:
/// every recorded line is delivered or counted once, in order; the counters add up after every event;
/// the pending cap holds; a pending batch's spool file is never removed.
@Suite struct BatchingStatePropertyTests {
    /// What the test saw happen to the lines, by their number.
    struct Ledger {
        var recorded = 0
        /// Per destination: the lines it stored and the lines it refused.
        var delivered: [[Int]]
        var refused: [[Int]]
        /// Lines offered after intake closed: dropped (and counted) without being recorded.
        var offeredAfterClose = 0

        init(destinations: Int) {
            delivered = Array(repeating: [], count: destinations)
            refused = Array(repeating: [], count: destinations)
        }
    }

    /// The numbers of the lines in `bytes` (each line is `m n=<number>i`).
    static func numbers(_ bytes: [UInt8]) -> [Int] {
        String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "n=")?.upperBound, let end = line.lastIndex(of: "i") else { return nil }
            return Int(line[start..<end])
        }
    }

    static func lines(of segment: String, in state: BatchingState) -> [Int] {
        guard let batch = state.batches.first(where: { $0.segment == segment }), let lines = batch.contents.lines()
        else { return [] }
        return numbers(lines)
    }

    /// Records one line numbered `number` (`m n=<number>i`); whether the state took it.
    static func record(_ number: Int, into state: inout BatchingState, now: Duration) -> Bool {
        Array("m n=\(number)i\n".utf8).withUnsafeBufferPointer { line in
            state.record(EncodedLine(bytes: line, seriesKeyBytes: 1, timestamp: nil), series: 0, now: now).accepted
        }
    }

    /// The spool work a round takes out (none when the action asks for nothing).
    static func spoolWork(_ state: inout BatchingState) -> SpoolWork {
        guard case .writeSpool(let work) = state.handle(.spoolRoundStarted).work else { return SpoolWork() }
        return work
    }

    /// Checks what must hold after every event.
    static func checkInvariants(_ state: BatchingState, _ ledger: Ledger, seed: UInt64, step: Int) {
        let metrics = state.currentMetrics
        #expect(metrics.pointsRecorded == UInt64(ledger.recorded), "seed \(seed) step \(step)")
        #expect(
            metrics.pendingBytes == state.batches.reduce(0) { $0 + $1.lineBytes },
            "seed \(seed) step \(step): pending bytes are the batches' bytes"
        )
        #expect(state.batches.allSatisfy { $0.awaiting != 0 }, "seed \(seed) step \(step): no batch nobody needs")
        for (index, destination) in metrics.destinations.enumerated() {
            let accounted =
                destination.pointsWritten + destination.pointsDropped + destination.pointsRejected
                + destination.pointsExpired + UInt64(destination.pendingLines)
            #expect(
                accounted == metrics.pointsRecorded,
                "seed \(seed) step \(step) destination \(index): counts add up"
            )
            let bit: UInt64 = 1 << UInt64(index)
            let backlog = state.batches.filter { $0.awaiting & bit != 0 }
            #expect(destination.pendingLines == backlog.reduce(0) { $0 + $1.lineCount }, "seed \(seed) step \(step)")
            #expect(destination.pendingBytes == backlog.reduce(0) { $0 + $1.lineBytes }, "seed \(seed) step \(step)")
            // Past the cap only by the batch being filled (or the halves of one split after a 413).
            #expect(
                destination.pendingBytes <= state.destinations[index].maximumPendingBytes + state.limits.maximumBytes
                    + 32,
                "seed \(seed) step \(step) destination \(index): the cap holds"
            )
            #expect(destination.pointsWritten == UInt64(ledger.delivered[index].count), "seed \(seed) step \(step)")
            let delivered = ledger.delivered[index]
            #expect(zip(delivered, delivered.dropFirst()).allSatisfy { $0 < $1 }, "seed \(seed): order kept")
        }
        #expect(
            state.batches.allSatisfy { $0.lineCount > 0 || !$0.isSealed },
            "seed \(seed) step \(step): no empty sealed batch"
        )
    }

    /// One random run of `steps` events.
    static func run(seed: UInt64, steps: Int, learnsOffset: Bool = false) {
        var random = SeededGenerator(state: seed)
        var limits = APIHealthConfiguration.Batching()
        limits.maximumLines = Int.random(in: 3...40, using: &random)
        limits.maximumBytes = Int.random(in: 60...2_000, using: &random)
        limits.maximumPendingBytes = Int.random(in: 200...6_000, using: &random)
        limits.flushDelay = .milliseconds(Int64.random(in: 1...50, using: &random))
        limits.maximumAge = .milliseconds(Int64.random(in: 50...200, using: &random))
        let hasSpool = Bool.random(using: &random)
        let destinationCount = Int.random(in: 1...3, using: &random)
        let caps = (0..<destinationCount).map { _ in Int.random(in: 200...6_000, using: &random) }
        var state = BatchingState(limits: limits, precision: .ns, hasSpool: hasSpool, destinationCaps: caps)
        var ledger = Ledger(destinations: destinationCount)
        var now = Duration.zero
        var removedSegments = Set<String>()

        func record(_ count: Int) {
            for _ in 0..<count {
                if Self.record(ledger.recorded, into: &state, now: now) {
                    ledger.recorded += 1
                } else {
                    ledger.offeredAfterClose += 1
                }
            }
            for (index, destination) in state.destinations.enumerated() {
                let bit: UInt64 = 1 << UInt64(index)
                #expect(
                    destination.pendingBytes <= destination.maximumPendingBytes
                        || state.batches.filter { $0.awaiting & bit != 0 }.count <= 1,
                    "seed \(seed): after a line is recorded, the cap holds but for the one batch left"
                )
            }
        }

        func spoolRound() {
            let work = Self.spoolWork(&state)
            let pendingSegments = Set(state.batches.map(\.segment))
            for segment in work.removals {
                #expect(!pendingSegments.contains(segment), "seed \(seed): a pending batch's file is never removed")
                removedSegments.insert(segment)
            }
            var progress = SpoolProgress()
            for item in work.appends where !Bool.random(using: &random) || item.bytes.isEmpty {
                progress.written.append((item.segment, item.end, item.seals))
            }
            _ = state.handle(.spoolRoundFinished(progress))
        }

        func send(outcome: Int, to destination: Int) {
            let id = DestinationID(index: destination)
            switch state.handle(.sendWanted(id, now: now, openDeadline: nil)).work {
            case .join(let plan):
                // Sometimes the cap drops a source while the join is made outside the lock.
                if Bool.random(using: &random) { record(Int.random(in: 0...30, using: &random)) }
                let joined = plan.contents.reduce(into: [UInt8]()) { $0 += $1.lines() ?? [] }
                let written = hasSpool && Int.random(in: 0..<5, using: &random) > 0
                _ = state.handle(.joined(plan, lines: joined, written: written, failure: nil))
            case .send(let segment, _, let lineCount, let lineBytes):
                let numbers = lines(of: segment, in: state)
                #expect(numbers.count == lineCount, "seed \(seed): a batch's line count is its lines")
                // Sometimes another destination's answer, or the cap, comes between the send and its answer.
                if destinationCount > 1 && Int.random(in: 0..<4, using: &random) == 0 {
                    send(outcome: Int.random(in: 0..<10, using: &random), to: (destination + 1) % destinationCount)
                }
                if Int.random(in: 0..<8, using: &random) == 0 { record(Int.random(in: 1...40, using: &random)) }
                let stillNeeded = state.batches.contains {
                    $0.segment == segment && $0.awaiting & (1 << UInt64(destination)) != 0
                }
                switch outcome {
                case 0..<5:
                    if stillNeeded { ledger.delivered[destination] += numbers }
                    _ = state.handle(
                        .delivered(segment: segment, id, sentBytes: lineBytes, compressedBytes: lineBytes / 2)
                    )
                case 5:
                    if stillNeeded { ledger.refused[destination] += numbers }
                    _ = state.handle(.refused(segment: segment, id, reason: "HTTP 400", refused: .all))
                case 6:
                    // A partial write: the server stored all but the refused lines (counted, not known by number).
                    let refusedCount = Int.random(in: 0...lineCount, using: &random)
                    if stillNeeded {
                        ledger.delivered[destination] += numbers.dropLast(refusedCount)
                        ledger.refused[destination] += numbers.suffix(refusedCount)
                    }
                    _ = state.handle(
                        .refused(segment: segment, id, reason: "HTTP 400 partial", refused: .count(refusedCount))
                    )
                case 7:
                    guard
                        case .split(_, let contents, let lineCount) = state.handle(.splitWanted(segment: segment)).work,
                        let lines = contents.lines(), let halves = SplitHalves(lines, count: lineCount)
                    else {
                        if stillNeeded { ledger.refused[destination] += numbers }
                        _ = state.handle(.refused(segment: segment, id, reason: "HTTP 413", refused: .all))
                        return
                    }
                    #expect(Self.numbers(halves.first) + Self.numbers(halves.second) == numbers)
                    _ = state.handle(
                        .split(
                            segment: segment,
                            id,
                            halves: halves,
                            names: SegmentName.halves(of: segment),
                            written: hasSpool && Bool.random(using: &random),
                            failure: nil
                        )
                    )
                default:
                    // Past the retry limit the state sets the batch aside as expired itself.
                    let expiredBefore = state.currentMetrics.destinations[destination].pointsExpired
                    _ = state.handle(
                        .sendFailed(
                            segment: segment,
                            id,
                            notBefore: now + .milliseconds(Int64.random(in: 0...30, using: &random)),
                            now: now,
                            error: "refused",
                            retryLimit: .milliseconds(100)
                        )
                    )
                    if state.currentMetrics.destinations[destination].pointsExpired > expiredBefore {
                        #expect(stillNeeded, "seed \(seed): only a batch the destination needs expires")
                        ledger.refused[destination] += numbers
                    }
                }
            default:
                return
            }
        }

        for step in 0..<steps {
            if learnsOffset && step == steps / 2 {
                // The device clock's offset learned halfway (by a seed's choice, drawing nothing from the
                // generator, so the event sequence is the seed's own): batches that can still be moved remember
                // it, bodies made are made again; no line is lost, doubled or reordered. (The lines carry no
                // timestamp, so that the seed's events are the other test's: PointsInTrueTimeTests moves some.)
                _ = state.handle(.offsetLearned(nanoseconds: 1_000))
            }
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<35: record(Int.random(in: 1...20, using: &random))
            case 35..<50: now += .milliseconds(Int64.random(in: 0...40, using: &random))
            case 50..<58: _ = state.handle(.flushDue(now: now, jitter: .zero))
            case 58..<60: _ = state.handle(.flushRequested)
            case 60..<85:
                send(
                    outcome: Int.random(in: 0..<10, using: &random),
                    to: Int.random(in: 0..<destinationCount, using: &random)
                )
            case 85..<95: spoolRound()
            default:
                if case .makeBody(let segment, let lines, let shift) = state.handle(.waitingBodyWanted).work,
                    let body = try? Gzip.compress(shift?.apply(to: lines) ?? lines, level: 1)
                {
                    _ = state.handle(
                        .bodyMade(segment: segment, body: body, linesClamped: 0, restamped: shift != nil)
                    )
                }
            }
            checkInvariants(state, ledger, seed: seed, step: step)
        }

        // Shut down and deliver what is left: every line is delivered or counted, each once.
        _ = state.handle(.intakeClosed)
        record(3)
        var rounds = 0
        while !state.batches.isEmpty && rounds < 100_000 {
            rounds += 1
            _ = state.handle(.retryWaitsCleared)
            spoolRound()
            for destination in 0..<destinationCount { send(outcome: 0, to: destination) }
        }
        spoolRound()
        checkInvariants(state, ledger, seed: seed, step: steps)
        #expect(state.batches.isEmpty, "seed \(seed): everything left the batches")
        let metrics = state.currentMetrics
        #expect(state.droppedAfterClose == UInt64(ledger.offeredAfterClose))
        for (index, destination) in metrics.destinations.enumerated() {
            let seen = ledger.delivered[index] + ledger.refused[index]
            #expect(
                Set(seen).count == seen.count,
                "seed \(seed) destination \(index): no line delivered or refused twice"
            )
            #expect(
                UInt64(ledger.delivered[index].count) + destination.pointsRejected + destination.pointsExpired
                    + destination.pointsDropped == UInt64(ledger.recorded),
                "seed \(seed) destination \(index): every line is delivered or counted"
            )
            #expect(ledger.delivered[index].allSatisfy { $0 < ledger.recorded })
        }
    }

    @Test(arguments: 0..<64)
    func randomEventSequencesKeepEveryLineAndTheOrder(_ seed: UInt64) {
        Self.run(seed: seed &* 0x1000_0001 &+ 17, steps: 600)
    }

    /// The same runs, the device clock's offset learned halfway through.
    @Test(arguments: 0..<64)
    func theClocksOffsetLearnedMidwayKeepsEveryLineAndTheOrder(_ seed: UInt64) {
        Self.run(seed: seed &* 0x1000_0001 &+ 17, steps: 600, learnsOffset: true)
    }

    @Test func droppingTheHeadAtTheCapKeepsTheRetrySchedule() {
        var limits = APIHealthConfiguration.Batching()
        limits.maximumBytes = 100
        limits.maximumPendingBytes = 300
        let first = DestinationID(index: 0)
        var state = BatchingState(limits: limits, precision: .ns, hasSpool: true, destinationCaps: [300])
        for number in 0..<10 { _ = Self.record(number, into: &state, now: .zero) }
        _ = state.handle(.flushRequested)
        guard case .send(let head, _, _, _) = state.handle(.sendWanted(first, now: .zero, openDeadline: nil)).work
        else {
            Issue.record("a full batch is sent")
            return
        }
        _ = state.handle(
            .sendFailed(segment: head, first, notBefore: .seconds(8), now: .zero, error: "down", retryLimit: nil)
        )
        #expect(state.currentMetrics.pointsExpired == 0)
        for number in 0..<200 { _ = Self.record(number, into: &state, now: .zero) }
        #expect(state.batches.first?.segment != head, "the head was dropped at the cap")
        #expect(state.currentMetrics.pointsDropped > 0)
        guard case .wait(let until) = state.handle(.sendWanted(first, now: .seconds(1), openDeadline: nil)).work else {
            Issue.record("the destination waits out its retry schedule")
            return
        }
        #expect(until == .seconds(8))
        #expect(state.destinations[0].failedAttempts == 1)
        #expect(Self.spoolWork(&state).removals.contains(head), "the dropped batch's file goes to the spool worker")
    }

    @Test func aJoinWhoseSourceWasDroppedIsLetGo() {
        var limits = APIHealthConfiguration.Batching()
        limits.maximumBytes = 1_000
        limits.maximumPendingBytes = 400
        var state = BatchingState(limits: limits, precision: .ns, hasSpool: true, destinationCaps: [400])
        var number = 0
        func record(_ count: Int) {
            for _ in 0..<count {
                _ = Self.record(number, into: &state, now: .zero)
                number += 1
            }
        }
        for _ in 0..<3 {
            record(4)
            _ = state.handle(.flushRequested)
        }
        var progress = SpoolProgress()
        for item in Self.spoolWork(&state).appends { progress.written.append((item.segment, item.end, true)) }
        _ = state.handle(.spoolRoundFinished(progress))
        let first = DestinationID(index: 0)
        guard case .join(let plan) = state.handle(.sendWanted(first, now: .zero, openDeadline: nil)).work else {
            Issue.record("three small sealed batches are joined")
            return
        }
        #expect(plan.sources.count == 3)
        record(60)
        #expect(!state.batches.contains { plan.sources.contains($0.segment) }, "the cap dropped the sources")
        _ = state.handle(.joined(plan, lines: [], written: true, failure: nil))
        #expect(!state.batches.contains { $0.segment == plan.segment })
        #expect(Self.spoolWork(&state).removals.contains(plan.segment), "the join's own file goes")
    }

    @Test func aBatchFailingPastTheRetryLimitIsSetAsideAsExpiredWithItsLinesForRejected() {
        let first = DestinationID(index: 0)
        var state = BatchingState(
            limits: APIHealthConfiguration.Batching(),
            precision: .ns,
            hasSpool: true,
            destinationCaps: [64 << 20]
        )
        for number in 0..<5 { _ = Self.record(number, into: &state, now: .zero) }
        _ = state.handle(.flushRequested)
        guard case .send(let head, _, _, _) = state.handle(.sendWanted(first, now: .zero, openDeadline: nil)).work
        else {
            Issue.record("the batch is sent")
            return
        }
        let kept = state.handle(
            .sendFailed(
                segment: head,
                first,
                notBefore: .seconds(1),
                now: .zero,
                error: "down",
                retryLimit: .seconds(60)
            )
        )
        guard case .none = kept.work else {
            Issue.record("within the retry limit the batch is kept")
            return
        }
        let expired = state.handle(
            .sendFailed(
                segment: head,
                first,
                notBefore: .seconds(62),
                now: .seconds(61),
                error: "down",
                retryLimit: .seconds(60)
            )
        )
        guard case .writeRejected(let segment, let contents, let reason, let removesFile, nil) = expired.work else {
            Issue.record("past the retry limit the batch's lines go to rejected/")
            return
        }
        #expect(segment == head && removesFile && reason.contains("retry limit"))
        #expect(Self.numbers(contents.bytes) == [0, 1, 2, 3, 4])
        #expect(state.currentMetrics.pointsExpired == 5 && state.batches.isEmpty)
        #expect(expired.wakeups.contains(.batchesLeft))
    }

    /// Two destinations find one batch too large, the second after the first has delivered its first half: the
    /// second shares the half still pending and gets a first half of its own; no two pending batches share a
    /// name (a spool file), and every line reaches each destination once.
    @Test func aSecondDestinationSplittingABatchAfterTheFirstDeliveredAHalfSharesWhatIsLeft() {
        var state = BatchingState(
            limits: APIHealthConfiguration.Batching(),
            precision: .ns,
            hasSpool: true,
            destinationCaps: [1 << 20, 1 << 20]
        )
        for number in 0..<4 { _ = Self.record(number, into: &state, now: .zero) }
        _ = state.handle(.flushRequested)
        let first = DestinationID(index: 0)
        let second = DestinationID(index: 1)
        func split(for destination: DestinationID) {
            guard
                case .send(let segment, _, _, _) = state.handle(
                    .sendWanted(destination, now: .zero, openDeadline: nil)
                ).work,
                case .split(_, let contents, let count) = state.handle(.splitWanted(segment: segment)).work,
                let lines = contents.lines(), let halves = SplitHalves(lines, count: count)
            else {
                Issue.record("the batch is sent and split for \(destination)")
                return
            }
            let names = SegmentName.halves(of: segment)
            _ = state.handle(
                .split(segment: segment, destination, halves: halves, names: names, written: true, failure: nil)
            )
        }
        func deliverHead(to destination: DestinationID) -> [Int] {
            guard
                case .send(let segment, _, _, _) = state.handle(
                    .sendWanted(destination, now: .zero, openDeadline: nil)
                ).work,
                let lines = state.batches.first(where: { $0.segment == segment })?.contents.lines()
            else { return [] }
            _ = state.handle(.delivered(segment: segment, destination, sentBytes: 1, compressedBytes: 1))
            return Self.numbers(lines)
        }
        split(for: first)
        var delivered = [first: deliverHead(to: first), second: [Int]()]
        split(for: second)
        let segments = state.batches.map(\.segment)
        #expect(Set(segments).count == segments.count, "no two pending batches share a name: \(segments)")
        while !state.batches.isEmpty {
            let before = state.batches.count
            delivered[first, default: []] += deliverHead(to: first)
            delivered[second, default: []] += deliverHead(to: second)
            if state.batches.count == before { break }
        }
        #expect(state.batches.isEmpty)
        #expect(delivered[first]?.sorted() == [0, 1, 2, 3])
        #expect(delivered[second]?.sorted() == [0, 1, 2, 3])
    }
}
