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
            // Below the quorum, the first destination readings that all agree set the offset at once,
            // within the range they allow (a second and the round trip).
            let offset = try #require(estimator.offset)
            #expect(abs(offset - -fast) <= ClockOffsetEstimator.maximumUncertainty)
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
        // The year 2001 (before any true time, from any server) and the year 2100 (more than a day from
        // the device's clock, from an API).
        for (server, fromDestination) in [(Int64(978_307_200), true), (978_307_200, false), (4_102_444_800, false)] {
            let reading = ClockOffsetEstimator.Reading(
                serverSeconds: server,
                sentAt: sent,
                receivedAt: sent + 10_000_000
            )
            for _ in 0..<3 {
                let refused = !estimator.add(reading, fromDestination: fromDestination)
                #expect(refused)
            }
        }
        #expect(estimator.offset == nil)
        #expect(estimator.readings.isEmpty)
        // Three APIs all a week off agree, and still move nothing: a day is the most an API's header may say.
        for index in 0..<3 {
            let instant = sent + Int64(index) * Self.second
            let refused = !estimator.add(
                Self.reading(at: instant, fast: -7 * 86_400 * Self.second),
                fromDestination: false
            )
            #expect(refused)
        }
        #expect(estimator.offset == nil)
    }

    @Test func agreeingDestinationReadingsCorrectAClockAWeekOff() throws {
        let slow = 7 * 86_400 * Self.second
        var estimator = ClockOffsetEstimator()
        // One destination header a week off moves nothing on its own: it may be a wrong one.
        estimator.add(Self.reading(at: Self.trueSeconds * Self.second, fast: -slow), fromDestination: true)
        estimator.add(Self.reading(at: (Self.trueSeconds + 5) * Self.second, fast: -slow), fromDestination: true)
        #expect(estimator.offset == nil)
        // The third agreeing one is the quorum: the device's clock a week slow is corrected.
        estimator.add(Self.reading(at: (Self.trueSeconds + 9) * Self.second, fast: -slow), fromDestination: true)
        #expect(abs(try #require(estimator.offset) - slow) < Self.second)
        // A server whose clock lost its time (before any true time) is never a reading, agreeing or not.
        var lost = ClockOffsetEstimator()
        for index in 0..<3 {
            let refused = !lost.add(
                ClockOffsetEstimator.Reading(
                    serverSeconds: 946_684_800 + Int64(index),
                    sentAt: (Self.trueSeconds + Int64(index)) * Self.second,
                    receivedAt: (Self.trueSeconds + Int64(index)) * Self.second + 10_000_000
                ),
                fromDestination: true
            )
            #expect(refused)
        }
        #expect(lost.offset == nil)
    }

    /// A response a CDN or proxy cache kept a day (or an hour) carries its origin's `Date`: with its `Age`
    /// it is a true reading; without it, three hits of the object would agree on an offset that far off.
    @Test(arguments: [86_400, 3_600])
    func cachedObjectsReadWithTheirAgeNeverMoveTheOffset(age: Int64) throws {
        let clock = ShiftedWallClock(ahead: .seconds(-7_200))
        let correction = ClockCorrection(clock: clock)
        for index in 0..<3 {
            let sent = clock.wallNow.adding(nanoseconds: Int64(index) * 2 * Self.second)
            let trueSeconds = sent.nanosecondsSinceEpoch / Self.second + 7_200
            correction.observe(
                dateHeader: Self.httpDate(trueSeconds - age),
                age: String(age),
                sentAt: sent,
                receivedAt: sent.adding(nanoseconds: 20_000_000),
                from: .api
            )
        }
        let offset = try #require(correction.offset)
        #expect(abs(offset.secondsDouble - 7_200) < 2, "offset \(offset)")
        #expect(correction.ignoredReadings == 0)
    }

    @Test(arguments: ["-5", "1.5", "abc", "", "99999999999", " 10"])
    func aMalformedAgeMakesNoReading(age: String) {
        let correction = ClockCorrection(clock: ManualClock())
        let sent = Timestamp(seconds: Self.trueSeconds)
        for _ in 0..<3 {
            correction.observe(
                dateHeader: Self.httpDate(Self.trueSeconds),
                age: age,
                sentAt: sent,
                receivedAt: sent.adding(nanoseconds: 20_000_000),
                from: .api
            )
        }
        #expect(correction.offset == nil)
        #expect(correction.ignoredReadings == 3)
    }

    @Test func theFirstDestinationReadingReplacesAnAPIDerivedOffset() throws {
        let fast = 600 * Self.second
        var estimator = ClockOffsetEstimator()
        for index in 0..<5 {
            estimator.add(
                Self.reading(at: (Self.trueSeconds + Int64(index)) * Self.second, fast: fast + 40 * Self.second),
                fromDestination: false
            )
        }
        #expect(abs(try #require(estimator.offset) - -(fast + 40 * Self.second)) < Self.second)
        // One post: the destination's answer is the offset from now on, within its one reading's range.
        estimator.add(Self.reading(at: (Self.trueSeconds + 60) * Self.second, fast: fast), fromDestination: true)
        let offset = try #require(estimator.offset)
        #expect(abs(offset - -fast) < Self.second)
        #expect(try #require(estimator.uncertainty) <= ClockOffsetEstimator.maximumUncertainty)
        // Two posts that disagree by more than their ranges leave it where it was until a majority agrees.
        estimator.add(
            Self.reading(at: (Self.trueSeconds + 90) * Self.second, fast: fast + 30 * Self.second),
            fromDestination: true
        )
        #expect(estimator.offset == offset)
    }

    @Test func aWallClockSetRightIsFollowedAtOnce() throws {
        let clock = ShiftedWallClock(ahead: .seconds(7_200))
        let correction = ClockCorrection(clock: clock)
        func observeTrueDate() {
            let sent = clock.wallNow
            let trueNow = Date().timeIntervalSince1970
            correction.observe(
                dateHeader: Self.httpDate(Int64(trueNow)),
                sentAt: sent,
                receivedAt: clock.wallNow.adding(nanoseconds: 1_000_000),
                from: .destination
            )
        }
        for _ in 0..<3 { observeTrueDate() }
        #expect(abs(try #require(correction.offset).secondsDouble + 7_200) < 2)
        // The user sets the phone's clock right: the corrected clock runs on unmoved, with no new reading.
        clock.step(by: .seconds(-7_200))
        let corrected = Double(correction.now.nanosecondsSinceEpoch) / 1e9
        #expect(abs(corrected - Date().timeIntervalSince1970) < 2, "corrected \(corrected)")
        #expect(correction.wallClockSteps == 1)
        #expect(abs(try #require(correction.offset).secondsDouble) < 2)
        // The readings start afresh: the old clock's readings never outvote the new ones.
        observeTrueDate()
        #expect(abs(try #require(correction.offset).secondsDouble) < 2)
        // A step with no offset learned yet: the readings restart, and no offset is guessed from the step.
        let unset = ShiftedWallClock(ahead: .seconds(7_200))
        let fresh = ClockCorrection(clock: unset)
        #expect(fresh.offsetNanoseconds == 0)
        unset.step(by: .seconds(-7_200))
        #expect(fresh.offsetNanoseconds == 0)
        #expect(fresh.offset == nil)
        #expect(fresh.wallClockSteps == 1)
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
