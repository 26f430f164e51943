import Foundation
import LineProtocol
import TestSupport
import Testing

@testable import APIHealth

/// The clock correction on its own: HTTP dates, the offset readings agree on, and headers that must not
/// move it (missing, malformed, wildly wrong, outvoted).
@Suite struct ClockCorrectionTests {
    static let second: Int64 = 1_000_000_000
    /// 2026-11-28T10:00:00Z.
    static let trueSeconds: Int64 = 1_796_724_000

    /// The IMF-fixdate a server sends at `seconds` since the epoch.
    static func httpDate(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    @Test func readsTheThreeFormsOfAnHTTPDate() {
        #expect(HTTPDate.secondsSinceEpoch("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.secondsSinceEpoch("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.secondsSinceEpoch("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(HTTPDate.secondsSinceEpoch("Thu, 29 Feb 2024 23:59:59 GMT") == 1_709_251_199)
        #expect(HTTPDate.secondsSinceEpoch(Self.httpDate(Self.trueSeconds)) == Self.trueSeconds)
    }

    @Test(arguments: [
        "", "yesterday", "1796724000", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 99999999999999999999 Nov 1994 08:49:37 GMT",
    ])
    func refusesWhatIsNoHTTPDate(_ value: String) {
        #expect(HTTPDate.secondsSinceEpoch(value) == nil)
    }

    /// A device whose clock is `fast` ahead of true time, asking at true instants `at` (nanoseconds
    /// since the epoch) with a round trip of `roundTrip`: the reading its server's `Date` header gives.
    static func reading(
        at trueInstant: Int64,
        fast: Int64,
        roundTrip: Int64 = 20_000_000
    ) -> ClockOffsetEstimator.Reading {
        let serverSeconds = (trueInstant + roundTrip / 2) / second
        return ClockOffsetEstimator.Reading(
            serverSeconds: serverSeconds,
            sentAt: trueInstant + fast,
            receivedAt: trueInstant + fast + roundTrip
        )
    }

    @Test func readingsOfDifferentPhasesAgreeOnTheOffsetWithinASecond() throws {
        let fast = 2 * 3_600 * Self.second + 123_456_789
        var estimator = ClockOffsetEstimator()
        var generator = SeededGenerator(state: 5)
        for index in 0..<2 {
            estimator.add(
                Self.reading(at: Self.trueSeconds * Self.second + Int64(index) * 7 * Self.second, fast: fast),
                fromDestination: true
            )
            #expect(estimator.offset == nil, "two readings are below the quorum")
        }
        for index in 2..<16 {
            let phase = Int64.random(in: 0..<Self.second, using: &generator)
            let instant = Self.trueSeconds * Self.second + Int64(index) * 7 * Self.second + phase
            estimator.add(Self.reading(at: instant, fast: fast), fromDestination: true)
            let offset = try #require(estimator.offset)
            #expect(abs(offset - -fast) < Self.second, "offset \(offset) after \(index + 1) readings")
        }
        // Sixteen phases narrow the agreed range to well under a second.
        let agreed = try #require(ClockOffsetEstimator.agreement(of: estimator.readings))
        #expect(agreed.count == 16)
        #expect(agreed.upper - agreed.lower < 200_000_000)
        #expect(abs(try #require(estimator.offset) - -fast) < 100_000_000)
    }

    @Test func theTrueOffsetLiesWithinTheUncertaintyWhateverTheRoundTrips() throws {
        var generator = SeededGenerator(state: 11)
        for _ in 0..<RandomCases.count(200) {
            let fast =
                Int64.random(in: -86_000...86_000, using: &generator) * Self.second
                + Int64.random(in: 0..<Self.second, using: &generator)
            var estimator = ClockOffsetEstimator()
            var instant = Self.trueSeconds * Self.second
            for _ in 0..<40 {
                instant += Int64.random(in: 0...(10 * Self.second), using: &generator)
                // Any round trip the estimator takes, the server's stamp anywhere within it.
                let roundTrip = Int64.random(in: 0...ClockOffsetEstimator.maximumRoundTrip, using: &generator)
                let stamped = instant + Int64.random(in: 0...roundTrip, using: &generator)
                estimator.add(
                    ClockOffsetEstimator.Reading(
                        serverSeconds: stamped / Self.second,
                        sentAt: instant + fast,
                        receivedAt: instant + fast + roundTrip
                    ),
                    fromDestination: true
                )
                guard let offset = estimator.offset else {
                    #expect(estimator.uncertainty == nil)
                    continue
                }
                let uncertainty = try #require(estimator.uncertainty)
                #expect(abs(offset - -fast) <= uncertainty, "offset \(offset), true \(-fast)")
                #expect(uncertainty <= ClockOffsetEstimator.maximumUncertainty)
            }
        }
    }

    @Test func aLyingHeaderAmongAgreeingOnesNeverMovesTheOffset() throws {
        let fast = 90 * Self.second
        var estimator = ClockOffsetEstimator()
        for index in 0..<4 {
            estimator.add(
                Self.reading(at: (Self.trueSeconds + Int64(index) * 5) * Self.second + 300_000_000, fast: fast),
                fromDestination: true
            )
        }
        let before = try #require(estimator.offset)
        // Twelve hours off, then a minute off: each agrees with no other reading.
        for lie in [12 * 3_600 * Self.second, 60 * Self.second, -30 * Self.second] {
            let instant = (Self.trueSeconds + 30) * Self.second
            estimator.add(Self.reading(at: instant + lie, fast: fast - lie), fromDestination: true)
            #expect(estimator.offset == before)
        }
    }

    @Test func aWildlyWrongHeaderIsNoReadingAtAll() {
        var estimator = ClockOffsetEstimator()
        let sent = Self.trueSeconds * Self.second
        // The year 2001 and the year 2100: more than a day from the device's clock.
        for server in [Int64(978_307_200), 4_102_444_800] {
            let reading = ClockOffsetEstimator.Reading(
                serverSeconds: server,
                sentAt: sent,
                receivedAt: sent + 10_000_000
            )
            for _ in 0..<3 {
                let refused = !estimator.add(reading, fromDestination: true)
                #expect(refused)
            }
        }
        #expect(estimator.offset == nil)
        #expect(estimator.readings.isEmpty)
        // Three servers all a week off agree, and still move nothing: a day is the most a header may say.
        for index in 0..<3 {
            let instant = sent + Int64(index) * Self.second
            let refused = !estimator.add(
                Self.reading(at: instant, fast: -7 * 86_400 * Self.second),
                fromDestination: true
            )
            #expect(refused)
        }
        #expect(estimator.offset == nil)
    }

    @Test func aSlowRoundTripSaysTooLittle() {
        var estimator = ClockOffsetEstimator()
        for index in 0..<5 {
            let reading = Self.reading(
                at: (Self.trueSeconds + Int64(index)) * Self.second,
                fast: 3_600 * Self.second,
                roundTrip: 8 * Self.second
            )
            let refused = !estimator.add(reading, fromDestination: true)
            #expect(refused)
        }
        #expect(estimator.offset == nil)
    }

    @Test func onceADestinationAnswersTheAPIsReadingsNoLongerCount() throws {
        let fast = 600 * Self.second
        var estimator = ClockOffsetEstimator()
        // An API whose clock is 40 s behind true time gives three readings: they agree, so they count.
        for index in 0..<3 {
            estimator.add(
                Self.reading(at: (Self.trueSeconds + Int64(index)) * Self.second, fast: fast + 40 * Self.second),
                fromDestination: false
            )
        }
        #expect(abs(try #require(estimator.offset) - -(fast + 40 * Self.second)) < Self.second)
        // The destination's first reading replaces them; its three set the offset.
        for index in 0..<3 {
            estimator.add(
                Self.reading(at: (Self.trueSeconds + 10 + Int64(index)) * Self.second + 500_000_000, fast: fast),
                fromDestination: true
            )
        }
        #expect(abs(try #require(estimator.offset) - -fast) < Self.second)
        let refused = !estimator.add(
            Self.reading(at: (Self.trueSeconds + 20) * Self.second, fast: fast),
            fromDestination: false
        )
        #expect(refused)
        #expect(estimator.readings.count == 3)
    }

    @Test func missingAndMalformedHeadersLeaveTheCorrectionWhereItWas() throws {
        let clock = ManualClock()
        let correction = ClockCorrection(clock: clock)
        let sent = Timestamp(seconds: Self.trueSeconds)
        let received = sent.adding(nanoseconds: 30_000_000)
        correction.observe(dateHeader: nil, sentAt: sent, receivedAt: received, from: .destination)
        #expect(correction.offset == nil)
        #expect(correction.ignoredReadings == 0, "a response without a Date header is no reading, and nothing wrong")
        for malformed in ["garbage", "Sun, 06 Nov 1994 08:49:37 PST", "Mon, 30 Nov 2026 25:00:00 GMT"] {
            correction.observe(dateHeader: malformed, sentAt: sent, receivedAt: received, from: .destination)
        }
        #expect(correction.offset == nil)
        #expect(correction.ignoredReadings == 3)
        // Three good readings: the device's clock (the manual clock's wall time) is true time here.
        for index in 0..<3 {
            let at = sent.adding(nanoseconds: Int64(index) * 3 * Self.second + 400_000_000)
            correction.observe(
                dateHeader: Self.httpDate(at.seconds),
                sentAt: at,
                receivedAt: at.adding(nanoseconds: 30_000_000),
                from: .destination
            )
        }
        let offset = try #require(correction.offset)
        #expect(abs(offset.components.seconds) < 1)
        for malformed in ["", "Tue, 31 Feb 2026 10:00:00 GMT"] {
            correction.observe(dateHeader: malformed, sentAt: sent, receivedAt: received, from: .destination)
            #expect(correction.offset == offset)
        }
        #expect(correction.ignoredReadings == 5)
    }
}
