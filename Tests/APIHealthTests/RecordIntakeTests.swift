import Dispatch
import Foundation
import Testing

@_spi(Package) @testable import APIHealth

/// The record stage's intake alone: requests taken in the order they came, a reader that returns only
/// once the loop has recorded what came before it, a bound a fast recording thread waits at rather than
/// losing anything, and none taken once it has closed. No test waits on time: a round is due at once
/// when a reader waits, when intake closes or when enough requests wait.
@Suite struct RecordIntakeTests {
    /// An ended request known by its number.
    private final class Numbered: EndedRequestSource {
        let number: Int
        init(_ number: Int) { self.number = number }
        func makeSample(correlationHeaders: [String]) -> RequestSample? { nil }
        func requestHeader(_ name: String) -> String? { nil }
    }

    private static func deferred(_ number: Int) -> DeferredSample {
        DeferredSample(now: .zero, source: .request(Numbered(number)))
    }

    private static func number(_ deferred: DeferredSample) -> Int {
        guard case .request(let request) = deferred.source, let numbered = request as? Numbered else { return -1 }
        return numbered.number
    }

    /// An intake with a loop on a thread of its own that hands each request to `record`.
    private static func intakeWithLoop(
        _ record: @escaping @Sendable (RecordIntake, DeferredSample) -> Void
    ) -> RecordIntake {
        let intake = RecordIntake()
        intake.startsLoop { intake in
            Thread {
                var round = IntakeRound()
                while intake.nextRound(into: &round) {
                    for deferred in round.requests { record(intake, deferred) }
                    intake.roundRecorded(&round)
                }
            }.start()
        }
        return intake
    }

    @Test func aRoundTakesEveryRequestInTheOrderTheyCame() {
        let intake = RecordIntake()
        for number in 1...5 { #expect(intake.enqueue(Self.deferred(number))) }
        #expect(!intake.isEmpty)
        intake.close()
        var round = IntakeRound()
        #expect(intake.nextRound(into: &round), "a closed intake still hands over what waits")
        #expect(round.requests.map(Self.number) == [1, 2, 3, 4, 5])
        intake.roundRecorded(&round)
        #expect(round.isEmpty && intake.isEmpty)
        #expect(!intake.nextRound(into: &round), "closed and empty: the loop returns")
    }

    @Test func samplesGivenWholeWaitInlineInTheOrderOfTheirEntries() {
        let intake = RecordIntake()
        func given(_ module: String) -> RequestSample {
            RequestSample(
                method: "GET",
                url: URL(string: "https://api.example.com/a")!,
                module: module,
                startedAt: Date(timeIntervalSince1970: 1_700_000_000),
                duration: .milliseconds(1)
            )
        }
        #expect(intake.enqueue(Self.deferred(1)))
        #expect(intake.enqueue(recorded: given("first"), now: .seconds(1)))
        #expect(intake.enqueue(Self.deferred(2)))
        #expect(intake.enqueue(recorded: given("second"), now: .seconds(2)))
        intake.close()
        #expect(!intake.enqueue(recorded: given("late"), now: .seconds(3)), "a closed intake refuses samples too")
        var round = IntakeRound()
        #expect(intake.nextRound(into: &round))
        let kinds = round.requests.map { deferred -> String in
            if case .recorded = deferred.source { return "recorded at \(deferred.now)" }
            return "request \(Self.number(deferred))"
        }
        #expect(kinds == ["request 1", "recorded at 1.0 seconds", "request 2", "recorded at 2.0 seconds"])
        #expect(round.samples.map(\.module) == ["first", "second"])
        intake.roundRecorded(&round)
        #expect(round.samples.isEmpty && intake.isEmpty)
    }

    @Test func aClosedIntakeRefusesRequests() {
        let intake = RecordIntake()
        #expect(intake.enqueue(Self.deferred(1)))
        intake.close()
        #expect(!intake.enqueue(Self.deferred(2)))
        var round = IntakeRound()
        #expect(intake.nextRound(into: &round))
        #expect(round.requests.map(Self.number) == [1], "what waited before it closed is still recorded")
    }

    /// The loop starts at the first request; a reader returns only once it has recorded every request
    /// queued before the reader asked, and asks for a round at once rather than waiting for one to fall due.
    @Test func aReaderReturnsOnceTheLoopHasRecordedWhatCameBefore() {
        let recorded = Locked<[Int]>([])
        let intake = Self.intakeWithLoop { _, deferred in recorded.withLock { $0.append(Self.number(deferred)) } }
        intake.catchUp()
        #expect(recorded.withLock { $0 }.isEmpty, "nothing queued: the reader returns at once")
        for round in 0..<3 {
            for number in 1...7 { #expect(intake.enqueue(Self.deferred(round * 7 + number))) }
            intake.catchUp()
            #expect(recorded.withLock { $0 } == Array(1...(round * 7 + 7)))
            #expect(intake.isEmpty)
        }
        intake.close()
    }

    /// A capture filter is the user's code and may read the agent, whose readers catch up first: from
    /// the loop's own thread that returns at once (this round records what waits), so the loop never
    /// waits for itself.
    @Test func aReaderOnTheLoopsOwnThreadReturnsAtOnce() {
        let recorded = Locked<[Int]>([])
        let intake = Self.intakeWithLoop { intake, deferred in
            intake.catchUp()
            recorded.withLock { $0.append(Self.number(deferred)) }
        }
        for number in 1...3 { #expect(intake.enqueue(Self.deferred(number))) }
        intake.catchUp()
        #expect(recorded.withLock { $0 } == [1, 2, 3])
        intake.close()
    }

    /// A thread queuing faster than the loop records waits for room at the bound: nothing is dropped,
    /// the order is kept, and the intake never holds more than its capacity.
    @Test func aFastRecordingThreadWaitsAtTheBoundAndLosesNothing() {
        let recorded = Locked<(numbers: [Int], mostWaiting: Int)>(([], 0))
        let intake = Self.intakeWithLoop { intake, deferred in
            let waiting = intake.waitingCount
            recorded.withLock {
                $0.numbers.append(Self.number(deferred))
                $0.mostWaiting = max($0.mostWaiting, waiting)
            }
        }
        let count = RecordIntake.capacity * 3
        let producers = DispatchGroup()
        DispatchQueue.global().async(group: producers) {
            for number in 1...count { _ = intake.enqueue(Self.deferred(number)) }
        }
        producers.wait()
        intake.catchUp()
        let (numbers, mostWaiting) = recorded.withLock { $0 }
        #expect(numbers == Array(1...count))
        #expect(mostWaiting <= RecordIntake.capacity)
        intake.close()
    }

    /// Closing and catching up returns once the loop has recorded everything queued, and the loop's
    /// thread then ends: a reader after it returns at once.
    @Test func closingRecordsWhatWaitsAndEndsTheLoop() {
        let recorded = Locked<[Int]>([])
        let intake = Self.intakeWithLoop { _, deferred in recorded.withLock { $0.append(Self.number(deferred)) } }
        for number in 1...4 { #expect(intake.enqueue(Self.deferred(number))) }
        intake.closeAndCatchUp()
        #expect(recorded.withLock { $0 } == [1, 2, 3, 4])
        #expect(!intake.enqueue(Self.deferred(5)))
        intake.catchUp()
        #expect(intake.isEmpty)
    }
}
