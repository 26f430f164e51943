import LineProtocol

/// Corrects a device's wall clock from the `Date` headers the agent sees, so an app on a phone whose clock
/// runs hours off still stamps its points in true time (``APIHealthConfiguration/correctsClock``).
///
/// Each header is one reading: the server wrote `Date: D` (true time, whole seconds) while the request was
/// between its start `s` and its response `r` on the device's clock, so the offset (true time minus the
/// device's) lies in `[D - r, D + 1 s - s]`. A response a cache kept says how old it is with `Age`: the
/// reading is `D + Age`. The offset applied is the middle of the range that most of the last
/// ``ClockOffsetEstimator/window`` readings agree on (Marzullo's algorithm), once at least
/// ``ClockOffsetEstimator/quorum`` of them and more than half of them do: one wrong or lying header never
/// moves it, and as readings with different sub-second phases arrive the range narrows well below a second.
///
/// What is a reading (the trust rules, <doc:APIHealthInAnApp>):
/// - only a response that came over the network: one a local cache served (`URLCache`) is no reading;
/// - a destination's response only with a success status (a proxy's 5xx is no reading); an API's with a
///   status below 500;
/// - the destinations' readings first (the clock the data is queried against): the first one replaces the
///   API-derived offset at once, and from then on the API's no longer count;
/// - a header more than ``ClockOffsetEstimator/maximumOffset`` from the device's clock moves nothing on its
///   own, but destination readings that agree correct a clock however far off;
/// - a step of the device's wall clock against its monotonic clock (the user or the network set the
///   time) starts the readings afresh, the offset moved by the step at once.
///
/// A missing or malformed header, one from before ``ClockOffsetEstimator/earliestTrueTime``, or a round
/// trip longer than ``ClockOffsetEstimator/maximumRoundTrip`` is no reading: it is ignored and counted
/// (``AgentMetrics/clockReadingsIgnored``).
///
/// ```swift
/// let correction = ClockCorrection(clock: SystemAgentClock())
/// correction.observe(dateHeader: "Sat, 28 Nov 2026 10:00:00 GMT", sentAt: sent, receivedAt: received, from: .destination)
/// let stamp = correction.now    // the device's clock plus the agreed offset
/// ```
final class ClockCorrection: Sendable {
    /// Where a reading came from.
    enum Source: Sendable {
        /// A destination's response to a write.
        case destination
        /// A response of the API the app calls, captured.
        case api
    }

    private struct State {
        var estimator = ClockOffsetEstimator()
        var ignored: UInt64 = 0
        var steps: UInt64 = 0
        /// The device's wall clock minus its monotonic one at the last look, in nanoseconds: a change of
        /// more than ``ClockCorrection/wallStepTolerance`` is a step of the wall clock.
        var wallMinusMonotonic: Int64?
        /// The monotonic time of that look: a look taken before it (on another thread) is stale.
        var lastLook: Duration = .zero
        /// How many times the wall clock was seen to step.
        var wallSteps: UInt64 = 0
        /// Whether an offset has been known: the first one is told to `offsetLearned`, once.
        var offsetWasLearned = false
        /// Told the first offset known (in nanoseconds), outside the lock.
        var offsetLearned: (@Sendable (Int64) -> Void)?
    }

    /// A change of the offset by more than this is a step: the interval clock sets its ends again.
    static let step: Int64 = 500_000_000
    /// How far the wall clock may move against the monotonic one between two looks without being a step:
    /// NTP slews a clock by at most 0.5 ms a second, and the looks come with every round of the record loop and every reading.
    static let wallStepTolerance: Int64 = 1_000_000_000

    private let clock: any AgentClock
    /// Whether `clock`'s wall and monotonic readings run together, so that a change of their difference
    /// is a step of the wall clock (a test's manual clock moves its monotonic time by hand).
    private let watchesWallClock: Bool
    /// Guards the readings, the offset and the wall clock's last look: readings come from the shippers
    /// and the record loop, the offset is read by every stamp the agent makes. A leaf of the lock order.
    private let state = Locked(State())

    /// A correction of `clock`'s wall time, with no reading yet (the offset is zero).
    init(clock: any AgentClock) {
        self.clock = clock
        self.watchesWallClock = clock.wallRunsWithMonotonic
    }

    /// The device's wall clock, corrected by the agreed offset.
    var now: Timestamp {
        let look = readClocks()
        return look.wall.adding(nanoseconds: state.withLock { lookAtWallClock(&$0, look) })
    }

    /// The offset applied, in nanoseconds (true time minus the device's); zero until readings agree.
    var offsetNanoseconds: Int64 {
        guard watchesWallClock else { return state.withLock { $0.estimator.offset ?? 0 } }
        let look = readClocks()
        return state.withLock { lookAtWallClock(&$0, look) }
    }

    /// The offset applied, in nanoseconds, `nil` until readings agree (the wall clock looked at first, as
    /// ``offsetNanoseconds`` does).
    var knownOffsetNanoseconds: Int64? {
        guard watchesWallClock else { return state.withLock { $0.estimator.offset } }
        let look = readClocks()
        return state.withLock { state in
            _ = Self.wallShift(&state, look)
            return state.estimator.offset
        }
    }

    /// Calls `handler` with the offset, in nanoseconds, when readings first agree on one (from the thread whose
    /// reading settled it, with no lock of the correction held): the agent moves the points still pending
    /// that were stamped on the device's clock to true time (``AgentMetrics/pointsOnDeviceClock``).
    func whenOffsetLearned(_ handler: @escaping @Sendable (Int64) -> Void) {
        state.withLock { $0.offsetLearned = handler }
    }

    /// The offset, `nil` until readings agree.
    var offset: Duration? { state.withLock { $0.estimator.offset.map { .nanoseconds($0) } } }

    /// How far the true offset may lie from ``offset``: half the range the readings agree on (the true
    /// offset is in that range when the servers' clocks are right); `nil` until readings agree.
    var uncertainty: Duration? { state.withLock { $0.estimator.uncertainty.map { .nanoseconds($0) } } }

    /// `Date` headers that were no reading: missing a parsable date, too far off, or too slow a round trip.
    var ignoredReadings: UInt64 { state.withLock { $0.ignored } }

    /// How many times the offset has moved by more than ``step``.
    var steps: UInt64 { state.withLock { $0.steps } }

    /// How many times the device's wall clock was seen to step against its monotonic clock.
    var wallClockSteps: UInt64 { state.withLock { $0.wallSteps } }

    /// Whether readings from captured API responses still count: until a destination has answered.
    var wantsAPIReadings: Bool { state.withLock { !$0.estimator.hasDestinationReadings } }

    /// Takes one response's `Date` header (plus its `Age`) as a reading of the offset.
    ///
    /// - Parameters:
    ///   - dateHeader: The header's value; `nil` when the response had none (then nothing happens).
    ///   - age: The response's `Age` header: how long a cache on the way kept it, in seconds.
    ///   - sentAt: When the request started, on the device's clock (``AgentClock/wallNow``).
    ///   - receivedAt: When its response came, on the same clock.
    ///   - source: Whose response it was.
    func observe(
        dateHeader: String?,
        age: String? = nil,
        sentAt: Timestamp,
        receivedAt: Timestamp,
        from source: Source
    ) {
        guard let dateHeader else { return }
        let look = readClocks()
        guard let seconds = HTTPDate.secondsSinceEpoch(dateHeader), let ageSeconds = Self.ageSeconds(age) else {
            state.withLock { $0.ignored += 1 }
            return
        }
        let reading = ClockOffsetEstimator.Reading(
            serverSeconds: seconds &+ ageSeconds,
            sentAt: sentAt.nanosecondsSinceEpoch,
            receivedAt: receivedAt.nanosecondsSinceEpoch
        )
        let learned = state.withLock { state -> (handler: (@Sendable (Int64) -> Void)?, offset: Int64)? in
            // A reading that may have been taken across a step of the wall clock mixes two clocks.
            if watchesWallClock, Self.wallShift(&state, look) != 0 {
                state.ignored += 1
                return nil
            }
            let before = state.estimator.offset ?? 0
            if !state.estimator.add(reading, fromDestination: source == .destination) { state.ignored += 1 }
            if abs((state.estimator.offset ?? 0) - before) > Self.step { state.steps += 1 }
            guard !state.offsetWasLearned, let offset = state.estimator.offset else { return nil }
            state.offsetWasLearned = true
            return (state.offsetLearned, offset)
        }
        if let learned { learned.handler?(learned.offset) }
    }

    /// The wall clock, with the monotonic time it was read at; `nil` for the latter when the thread was
    /// held up between the readings (or the clock's monotonic time is moved by hand), so that the two
    /// cannot be compared.
    private func readClocks() -> (wall: Timestamp, monotonic: Duration?) {
        guard watchesWallClock else { return (clock.wallNow, nil) }
        let before = clock.now
        let wall = clock.wallNow
        let after = clock.now
        return (wall, after - before < .milliseconds(50) ? before : nil)
    }

    /// Looks at the wall clock against the monotonic one (see ``wallShift(_:_:)``) and returns the offset
    /// then applied.
    private func lookAtWallClock(_ state: inout State, _ look: (wall: Timestamp, monotonic: Duration?)) -> Int64 {
        if watchesWallClock { _ = Self.wallShift(&state, look) }
        return state.estimator.offset ?? 0
    }

    /// How far the wall clock has stepped since the last look (zero within the tolerance); a step starts
    /// the readings afresh and moves the offset by as much the other way, so that the corrected clock runs
    /// on unmoved. A look older than the last one (another thread's, taken earlier) says nothing.
    private static func wallShift(_ state: inout State, _ look: (wall: Timestamp, monotonic: Duration?)) -> Int64 {
        guard let monotonic = look.monotonic, monotonic >= state.lastLook else { return 0 }
        let difference = look.wall.nanosecondsSinceEpoch &- (RequestSchema.wholeNanoseconds(monotonic) ?? 0)
        defer {
            state.wallMinusMonotonic = difference
            state.lastLook = monotonic
        }
        guard let last = state.wallMinusMonotonic else { return 0 }
        let shift = difference &- last
        guard abs(shift) > wallStepTolerance else { return 0 }
        state.wallSteps += 1
        state.estimator.wallClockStepped(by: shift)
        return shift
    }

    /// The seconds an `Age` header says (RFC 9111 section 5.1: a non-negative integer); zero without
    /// one, `nil` for one that is malformed or longer than ``ClockOffsetEstimator/maximumOffset``.
    static func ageSeconds(_ header: String?) -> Int64? {
        guard let header else { return 0 }
        let digits = header.utf8
        guard !digits.isEmpty, digits.count <= 10,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let seconds = Int64(header), seconds <= ClockOffsetEstimator.maximumOffset / 1_000_000_000
        else { return nil }
        return seconds
    }
}

/// The offset that most recent readings agree on (see ``ClockCorrection``): a value, tested on its own.
struct ClockOffsetEstimator: Sendable {
    /// How many of the latest readings are kept.
    static let window = 16
    /// How many readings must agree before an offset is applied.
    static let quorum = 3
    /// A single reading further from the device's clock than this moves nothing: a device whose clock is
    /// more than a day off has it set by hand, and correcting it by one server's say would be a guess. The
    /// destinations' readings that agree (``quorum``, a majority) correct it however far off.
    static let maximumOffset: Int64 = 86_400 * 1_000_000_000
    /// A reading from a round trip longer than this says too little to use.
    static let maximumRoundTrip: Int64 = 5 * 1_000_000_000
    /// The most ``uncertainty`` can be: half the widest reading taken (a second plus the longest round trip).
    static let maximumUncertainty: Int64 = (1_000_000_000 + maximumRoundTrip + 1) / 2
    /// No true time is earlier than this (2025-01-01T00:00:00Z, before this code was written): a server
    /// date before it is a server's clock that lost its time, never a reading.
    static let earliestTrueTime: Int64 = 1_735_689_600

    /// The offset range one header allows, in nanoseconds.
    struct Reading: Sendable, Equatable {
        var lower: Int64
        var upper: Int64
        /// The server's time, in seconds since the epoch.
        var serverSeconds: Int64 = .max

        init(lower: Int64, upper: Int64) {
            self.lower = lower
            self.upper = upper
        }

        /// The range a header of `serverSeconds` allows, for a request sent and answered at those device
        /// instants (nanoseconds since the epoch).
        init(serverSeconds: Int64, sentAt: Int64, receivedAt: Int64) {
            let server = serverSeconds &* 1_000_000_000
            self.lower = server &- receivedAt
            self.upper = server &+ 1_000_000_000 &- sentAt
            self.serverSeconds = serverSeconds
        }

        /// Whether it lies within ``ClockOffsetEstimator/maximumOffset`` of the device's clock.
        var isNear: Bool { lower > -ClockOffsetEstimator.maximumOffset && upper < ClockOffsetEstimator.maximumOffset }
    }

    private(set) var readings: [Reading] = []
    /// The offset applied, once readings agree.
    private(set) var offset: Int64?
    /// How far the true offset may lie from ``offset``, once readings agree: from it to the agreed
    /// range's far end; at most ``maximumUncertainty``.
    private(set) var uncertainty: Int64?
    /// Whether a destination has answered: from then on, only destinations' readings count.
    private(set) var hasDestinationReadings = false

    /// Adds `reading`; returns `false` when it is no reading (too slow, from before
    /// ``earliestTrueTime``, too far off from an API, or from the API once a destination has answered)
    /// and was left out.
    @discardableResult
    mutating func add(_ reading: Reading, fromDestination: Bool) -> Bool {
        guard reading.lower <= reading.upper, reading.upper &- reading.lower <= Self.maximumRoundTrip + 1_000_000_000,
            reading.serverSeconds >= Self.earliestTrueTime, reading.isNear || fromDestination
        else { return false }
        if fromDestination && !hasDestinationReadings {
            hasDestinationReadings = true
            readings.removeAll()
        } else if !fromDestination && hasDestinationReadings {
            return false
        }
        readings.append(reading)
        if readings.count > Self.window { readings.removeFirst(readings.count - Self.window) }
        guard let agreed = Self.agreement(of: readings) else { return true }
        if agreed.count >= Self.quorum, agreed.count * 2 > readings.count {
            apply(agreed)
        } else if fromDestination, readings.count < Self.quorum, agreed.count == readings.count,
            readings.allSatisfy(\.isNear)
        {
            // The first destination readings, all agreeing and each within a day: they replace an offset
            // the API's readings set at once, rather than after the quorum.
            apply(agreed)
        }
        return true
    }

    /// The wall clock stepped by `shift` nanoseconds: the readings so far are of the old clock and start
    /// afresh; an offset already agreed moves by as much the other way (true time did not step).
    mutating func wallClockStepped(by shift: Int64) {
        readings.removeAll()
        if let offset { self.offset = offset &- shift }
    }

    private mutating func apply(_ agreed: (lower: Int64, upper: Int64, count: Int)) {
        let middle = agreed.lower + (agreed.upper - agreed.lower) / 2
        offset = middle
        uncertainty = agreed.upper - middle
    }

    /// The range contained in the most readings (Marzullo's algorithm), and how many contain it.
    static func agreement(of readings: [Reading]) -> (lower: Int64, upper: Int64, count: Int)? {
        guard !readings.isEmpty else { return nil }
        // A range's start sorts before another's end at the same place: ranges that touch agree.
        var edges = readings.flatMap { [($0.lower, 1), ($0.upper, -1)] }
        edges.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 > $1.1 }
        var best: (lower: Int64, upper: Int64, count: Int)?
        var count = 0
        for (index, edge) in edges.enumerated() {
            count += edge.1
            if edge.1 == 1, count > (best?.count ?? 0) {
                best = (edge.0, edges[index + 1].0, count)
            }
        }
        return best
    }
}

/// HTTP dates (RFC 9110 section 5.6.7): the IMF-fixdate every server sends (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// and the two obsolete forms a recipient must still read (`Sunday, 06-Nov-94 08:49:37 GMT`,
/// `Sun Nov  6 08:49:37 1994`), parsed without a formatter.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the Unix epoch, or `nil` for anything that is not an HTTP date.
    static func secondsSinceEpoch(_ value: String) -> Int64? {
        let parts = value.split(separator: " ", omittingEmptySubsequences: true)
        let day: Int
        let month: Int
        var year: Int
        let time: Substring
        if parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT" {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard let d = Int(parts[1]), let m = monthNumber(parts[2]), let y = Int(parts[3]), parts[3].count == 4
            else { return nil }
            (day, month, year, time) = (d, m, y, parts[4])
        } else if parts.count == 4, parts[0].hasSuffix(","), parts[3] == "GMT" {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let date = parts[1].split(separator: "-")
            guard date.count == 3, let d = Int(date[0]), let m = monthNumber(date[1]), let y = Int(date[2]),
                date[2].count == 2
            else { return nil }
            (day, month, year, time) = (d, m, y, parts[2])
            // Two digits more than 50 years in the future are in the past (RFC 9110).
            year += year < 70 ? 2000 : 1900
        } else if parts.count == 5 {
            // asctime: Sun Nov  6 08:49:37 1994
            guard let m = monthNumber(parts[1]), let d = Int(parts[2]), let y = Int(parts[4]), parts[4].count == 4
            else { return nil }
            (day, month, year, time) = (d, m, y, parts[3])
        } else {
            return nil
        }
        let clock = time.split(separator: ":")
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int(clock[0]),
            let minute = Int(clock[1]), let second = Int(clock[2]),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (1...31).contains(day), (1...9999).contains(year), day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Int64(days) * 86_400 + Int64(hour * 3_600 + minute * 60 + second)
    }

    private static func monthNumber(_ name: Substring) -> Int? {
        months.firstIndex { $0 == name }.map { $0 + 1 }
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date (proleptic Gregorian; Howard Hinnant's `days_from_civil`).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
