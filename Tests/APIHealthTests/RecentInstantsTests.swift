import LineProtocol
import Testing

@testable import APIHealth

/// The instants remembered per series: no two points of a series share one while it is remembered.
@Suite struct RecentInstantsTests {
    @Test func anyIntegerIsASeries() {
        var instants = RecentInstants(precision: .ns)
        for series in [0, -1, 1, Int.min, Int.max] {
            #expect(instants.claim(series: series, timestamp: 10) == 10)
            #expect(instants.claim(series: series, timestamp: 10) == 11, "series \(series)")
            #expect(instants.claim(series: series, timestamp: 9) == 9, "an earlier free instant of series \(series)")
            #expect(instants.claim(series: series, timestamp: 9) == 12, "the next instant it has not used")
        }
    }

    /// More series than a generation holds: the latest instant per series is forgotten on the way
    /// (and the generations searched instead); a second point at a series' instant still moves on.
    @Test func manySeriesKeepTheirInstantsApart() {
        var instants = RecentInstants(precision: .ms)
        for series in 0..<30_000 {
            let id = series &* 0x5851_F42D_4C95_7F2D
            #expect(instants.claim(series: id, timestamp: 1_000) == 1_000)
            #expect(instants.claim(series: id, timestamp: 1_000) == 1_001)
            #expect(instants.claim(series: id, timestamp: 999) == 999)
        }
        for series in 29_000..<30_000 {
            let id = series &* 0x5851_F42D_4C95_7F2D
            #expect(instants.claim(series: id, timestamp: 1_000) == 1_002, "series \(series) is still remembered")
        }
    }
}
