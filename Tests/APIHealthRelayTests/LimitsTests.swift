import Testing

@testable import APIHealthRelay

/// The limits as plain values: a client's and a key's lines per minute, the table of clients bounded
/// whatever their number, a key's new series per hour.
@Suite struct LimitsTests {
    @Test func aBucketLetsAMinutesWorthThroughThenSaysHowLongToWait() {
        var bucket = LineBucket(perMinute: 600, now: .zero)
        let answer1 = bucket.wait(for: 600, perMinute: 600, now: .zero)
        #expect(answer1 == nil)
        bucket.take(600)
        // 10 lines a second: 100 lines wait 10 s, less what has refilled since.
        let answer2 = bucket.wait(for: 100, perMinute: 600, now: .zero)
        #expect(answer2 == .seconds(10))
        let answer3 = bucket.wait(for: 100, perMinute: 600, now: .seconds(4))
        #expect(answer3 == .seconds(6))
        let answer4 = bucket.wait(for: 100, perMinute: 600, now: .seconds(10))
        #expect(answer4 == nil)
        // Never more than a minute's worth, however long it waited.
        let answer5 = bucket.wait(for: 601, perMinute: 600, now: .seconds(3_600))
        #expect(answer5 == nil)
        #expect(bucket.tokens == 600)
    }

    @Test func aWriteLargerThanTheBucketGoesWhenItIsFullAndIsPaidOff() {
        var bucket = LineBucket(perMinute: 60, now: .zero)
        let answer6 = bucket.wait(for: 120, perMinute: 60, now: .zero)
        #expect(answer6 == nil)
        bucket.take(120)
        // 60 lines owed, then a minute for the next full bucket: two minutes.
        let answer7 = bucket.wait(for: 120, perMinute: 60, now: .zero)
        #expect(answer7 == .seconds(120))
        let answer8 = bucket.wait(for: 1, perMinute: 60, now: .seconds(61))
        #expect(answer8 == nil)
    }

    @Test func theClientTableForgetsTheLeastRecentlySeenClient() {
        var table = ClientTable(capacity: 3)
        for client in [1, 2, 3] as [UInt64] {
            let answer9 = table.wait(client: client, lines: 10, perMinute: 10, now: .zero)
            #expect(answer9 == nil)
            table.take(client: client, lines: 10)
        }
        let answer10 = table.wait(client: 1, lines: 10, perMinute: 10, now: .zero)
        #expect(answer10 != nil)
        #expect(table.clientsByRecency == [1, 3, 2])
        // A fourth client takes the place of 2, the least recently seen; 1 and 3 keep their empty buckets.
        let answer11 = table.wait(client: 4, lines: 10, perMinute: 10, now: .zero)
        #expect(answer11 == nil)
        #expect(table.clientsByRecency == [4, 1, 3])
        #expect(table.count == 3)
        #expect(table.evicted == 1)
        let answer12 = table.wait(client: 3, lines: 10, perMinute: 10, now: .zero)
        #expect(answer12 != nil)
        let answer13 = table.wait(client: 2, lines: 10, perMinute: 10, now: .zero)
        #expect(answer13 == nil)
        #expect(table.clientsByRecency == [2, 3, 4])
    }

    @Test func theClientTableStaysWithinItsBoundWhateverTheNumberOfClients() {
        var table = ClientTable(capacity: 1_000)
        for client in 0..<100_000 as Range<UInt64> {
            _ = table.wait(client: client &* 0x9E37_79B9_7F4A_7C15, lines: 1, perMinute: 60, now: .zero)
        }
        #expect(table.count == 1_000)
        #expect(table.evicted == 99_000)
        #expect(ClientTable.bytes(capacity: 1_000) < 100_000)
    }

    @Test func aKeyStartsAtMostItsNewSeriesInAnHour() {
        var budget = SeriesBudget(perHour: 3)
        func admitsAll(_ series: ClosedRange<UInt64>, at now: Duration) -> Bool {
            var all = true
            for one in series where !budget.admit(series: one, now: now) { all = false }
            return all
        }
        let start = Duration.seconds(7_200)
        #expect(admitsAll(1...3, at: start))
        let answer14 = budget.admit(series: 4, now: start + .seconds(60))
        #expect(!answer14)
        // Known series are always written.
        let answer15 = budget.admit(series: 2, now: start + .seconds(120))
        #expect(answer15)
        // The next hour: last hour's series are not new, and three more may start.
        let next = start + .seconds(3_600)
        #expect(admitsAll(1...3, at: next))
        #expect(admitsAll(4...6, at: next))
        let answer16 = budget.admit(series: 7, now: next)
        #expect(!answer16)
        // Two hours later, nothing is remembered: every series is new again.
        let later = next + .seconds(7_200)
        #expect(admitsAll(4...6, at: later))
        let answer17 = budget.admit(series: 1, now: later)
        #expect(!answer17)
    }
}
