import Dispatch
import Testing

@_spi(Package) @testable import APIHealth

/// The package's lock: one holder at a time, and every waiter gets it once it is released.
@Suite struct LockedTests {
    /// Threads that all want the lock at once: the state's non-atomic count sees every increment, and
    /// no thread ever finds another inside (the contended path: sleeping on the lock and being woken).
    @Test func contendedThreadsTakeTurns() {
        struct Counts {
            var total = 0
            var inside = 0
            var overlaps = 0
        }
        let counts = Locked(Counts())
        let threads = 4
        let increments = 50_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments {
                counts.withLock { counts in
                    counts.inside += 1
                    if counts.inside != 1 { counts.overlaps += 1 }
                    counts.total += 1
                    counts.inside -= 1
                }
            }
        }
        let final = counts.withLock { $0 }
        #expect(final.total == threads * increments)
        #expect(final.overlaps == 0)
    }

    /// While another thread holds the lock, `withLockIfAvailable` returns `nil` at once; once it is
    /// released, it runs.
    @Test func tryingAHeldLockDoesNotWait() {
        let value = Locked(7)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            value.withLock { _ in
                held.signal()
                release.wait()
            }
            released.signal()
        }
        held.wait()
        #expect(value.withLockIfAvailable { $0 } == nil)
        release.signal()
        released.wait()
        #expect(value.withLockIfAvailable { $0 } == 7)
    }

    /// `acquire` and `release` hold a `Locked<Void>` across steps: a thread that wants it meanwhile
    /// waits until it is released.
    @Test func acquireHoldsTheLockUntilRelease() {
        let lock = Locked<Void>()
        let order = Locked<[String]>([])
        lock.acquire()
        let waiting = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            waiting.signal()
            lock.withLock { order.withLock { $0.append("waiter") } }
            done.signal()
        }
        waiting.wait()
        order.withLock { $0.append("holder") }
        lock.release()
        done.wait()
        #expect(order.withLock { $0 } == ["holder", "waiter"])
    }
}
