import Dispatch
import Foundation
import Testing

@_spi(Package) @testable import APIHealth

/// The capture queue alone: ended requests recorded in the order they came, one drain at a time, and
/// none taken once it has closed.
@Suite struct CaptureQueueTests {
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

    @Test func aDrainTakesEveryRequestInTheOrderTheyCame() {
        let queue = CaptureQueue()
        for number in 1...5 { #expect(queue.enqueue(Self.deferred(number)) == number) }
        var drained: [Int] = []
        queue.drain { drained.append(Self.number($0)) }
        #expect(drained == [1, 2, 3, 4, 5])
        #expect(queue.isEmpty)
    }

    @Test func aClosedQueueRefusesRequests() {
        let queue = CaptureQueue()
        #expect(queue.enqueue(Self.deferred(1)) == 1)
        queue.close()
        #expect(queue.enqueue(Self.deferred(2)) == nil)
        var drained: [Int] = []
        queue.drain { drained.append(Self.number($0)) }
        #expect(drained == [1], "what waited before it closed is still recorded")
    }

    /// A drain started from within the one under way on the same thread (a capture filter that reads
    /// the agent) returns at once and leaves what waits to the drain under way or the next.
    @Test func aDrainFromWithinADrainReturnsAtOnce() {
        let queue = CaptureQueue()
        _ = queue.enqueue(Self.deferred(1))
        var drained: [Int] = []
        queue.drain { deferred in
            drained.append(Self.number(deferred))
            _ = queue.enqueue(Self.deferred(2))
            queue.drain { drained.append(Self.number($0)) }
        }
        #expect(drained == [1])
        queue.drain { drained.append(Self.number($0)) }
        #expect(drained == [1, 2])
    }

    /// A reader that must see every request waits for the drain under way on another thread to end;
    /// one that need not returns at once.
    @Test func aReaderWaitsForTheDrainUnderWayOnAnotherThread() {
        let queue = CaptureQueue()
        _ = queue.enqueue(Self.deferred(1))
        let recorded = Locked<[Int]>([])
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let drainer = Thread {
            queue.drain { deferred in
                started.signal()
                release.wait()
                recorded.withLock { $0.append(Self.number(deferred)) }
            }
        }
        drainer.start()
        started.wait()
        queue.drain(waitingForOneUnderWay: false) { _ in Issue.record("no second drain while one is under way") }
        let seen = Locked<[Int]?>(nil)
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            queue.drain { _ in }
            seen.withLock { $0 = recorded.withLock { $0 } }
            readerDone.signal()
        }
        reader.start()
        release.signal()
        readerDone.wait()
        #expect(seen.withLock { $0 } == [1], "the waiting reader returns once the drain under way has recorded")
    }
}
