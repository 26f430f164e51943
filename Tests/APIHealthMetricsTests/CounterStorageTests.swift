import Foundation
import Testing

@testable import APIHealthMetrics

@Suite struct CounterStorageTests {
    /// Both kinds, so the `Locked` stripes that macOS 13 and 14 use are tested where atomics exist too.
    static func kinds() -> [CounterStorage] {
        let key = SeriesIdentity(kind: .counter, measurement: "stripes", dimensions: [])
        var kinds: [CounterStorage] = [LockedCounterStorage(key: key)]
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            kinds.append(AtomicCounterStorage(key: key))
        }
        return kinds
    }

    @Test func incrementsFromManyThreadsAllCount() async {
        for counter in Self.kinds() {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        for _ in 0..<50_000 { counter.increment(by: 3) }
                    }
                }
            }
            #expect(counter.total == 8 * 50_000 * 3, "\(type(of: counter))")
            counter.reset()
            #expect(counter.total == 0, "\(type(of: counter))")
        }
    }
}
