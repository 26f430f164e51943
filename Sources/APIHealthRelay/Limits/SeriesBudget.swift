/// The series one key has written lately, and how many new ones it may still start: a series is new when
/// it was written in neither the current hour nor the one before; each hour a key may start
/// `perHour` of them. Memory is bounded by the budget: an hour remembers at most ``heldPerHour`` series
/// (those carried over from the hour before included), so two hours at most twice that.
///
/// ```swift
/// var budget = SeriesBudget(perHour: 10_000)
/// budget.admit(series: hash, now: now)   // true: known, or new and within the hour's budget
/// ```
package struct SeriesBudget: Sendable {
    package let perHour: Int
    private var current: Set<UInt64> = []
    private var previous: Set<UInt64> = []
    /// Series started in the current hour.
    private var started = 0
    /// The hour `current` is of (hours since the clock's origin).
    private var hour: Int64 = .min

    package init(perHour: Int) {
        self.perHour = perHour
    }

    /// The most series one hour remembers: four hours' budgets.
    package var heldPerHour: Int { Self.heldPerHour(perHour) }

    static func heldPerHour(_ perHour: Int) -> Int { perHour.multipliedReportingOverflow(by: 4).partialValue }

    /// The most memory the budget holds: two sets of ``heldPerHour`` hashes, each at most 3/4 full
    /// (a set's maximum load), rounded up to a power of two.
    package static func bytes(perHour: Int) -> Int {
        2 * heldPerHour(perHour) * MemoryLayout<UInt64>.stride * 4 / 3 * 2
    }

    /// Whether `series` may be written at `now`: it is known, or new and within the hour's budget (it
    /// is then remembered and counted).
    package mutating func admit(series: UInt64, now: Duration) -> Bool {
        let nowHour = now.components.seconds / 3_600
        if nowHour != hour {
            previous = nowHour == hour + 1 ? current : []
            current = []
            started = 0
            hour = nowHour
        }
        if current.contains(series) { return true }
        guard current.count < heldPerHour else { return false }
        if previous.contains(series) {
            current.insert(series)
            return true
        }
        guard started < perHour else { return false }
        started += 1
        current.insert(series)
        return true
    }
}
