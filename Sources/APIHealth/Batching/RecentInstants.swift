import LineProtocol

/// The instants recently written per series, so that no two points of one series share a timestamp
/// (InfluxDB would keep only the last of them): a point whose instant is taken is nudged forward by
/// one unit of the precision, as many times as needed, but never more than ``maximumNudge`` units
/// past its own instant: 1,000 units, and at most one second (so one unit at `s`). A point with no
/// free instant within that bound is declined (the agent drops and counts it) rather than written
/// over another: under a steady load above one point per unit on one series (at `s` or `ms`
/// precision), timestamps stay within the bound of the clock and the excess is counted, where
/// unbounded nudging would drift ever further into the future.
///
/// Two generations of 25,000 instants each are remembered, in tables of 512 KB. The usual point is later
/// than anything its series has written, which the latest instant per series answers at once; only
/// points that arrive out of order search the generations.
struct RecentInstants {
    private var current = InstantTable()
    private var previous = InstantTable()
    /// The latest instant claimed per series in either generation.
    private var latest = LatestInstants()
    /// Whether `latest` covers every instant remembered (it does not for one generation after it
    /// was forgotten).
    private var latestIsComplete = true
    static let generationSize = 25_000
    /// How far past its own instant a point may be moved, in units of the precision.
    let maximumNudge: Int64

    /// Instants for timestamps written in `precision`.
    init(precision: Precision) {
        maximumNudge = Self.maximumNudge(for: precision)
    }

    /// 1,000 units of `precision`, and at most one second: 1 µs at `ns`, 1 ms at `us`, 1 s at `ms` and `s`.
    static func maximumNudge(for precision: Precision) -> Int64 {
        max(1, min(1_000, 1_000_000_000 / precision.nanosecondsPerUnit))
    }

    /// The identity of a series, from its escaped series key.
    static func seriesID(_ seriesKey: UnsafeBufferPointer<UInt8>) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: UnsafeRawBufferPointer(seriesKey))
        return hasher.finalize()
    }

    private func isTaken(_ series: Int, _ timestamp: Int64) -> Bool {
        let fingerprint = InstantTable.fingerprint(series, timestamp)
        return current.contains(fingerprint) || previous.contains(fingerprint)
    }

    /// `timestamp`, or the first instant after it that `series` has not used yet, and claims it; `nil`
    /// (claiming nothing) when that instant would be more than ``maximumNudge`` units past `timestamp`.
    mutating func claim(series: Int, timestamp: Int64) -> Int64? {
        if current.count >= Self.generationSize { startGeneration() }
        return claim(series: series, timestamp: timestamp, latest: latest.find(series))
    }

    /// ``claim(series:timestamp:)`` with the series' latest instant and where it is kept (`found`).
    private mutating func claim(series: Int, timestamp: Int64, latest found: LatestInstant) -> Int64? {
        let last = found.instant
        let limit = timestamp.addingReportingOverflow(maximumNudge).overflow ? Int64.max : timestamp + maximumNudge
        var candidate = timestamp
        if !latestIsComplete || candidate <= last ?? Int64.min {
            var steps = 0
            while isTaken(series, candidate) {
                steps += 1
                // A burst on one series: jump past everything it has written.
                if steps > 4, latestIsComplete, let last, last >= candidate {
                    guard last < limit else { return nil }
                    candidate = last + 1
                    break
                }
                guard candidate < limit else { return nil }
                candidate += 1
            }
        }
        current.insert(InstantTable.fingerprint(series, candidate))
        if candidate > last ?? Int64.min { latest.set(candidate, for: series, found: found) }
        return candidate
    }

    private mutating func startGeneration() {
        swap(&previous, &current)
        current.removeAll()
        // Whatever `latest` last missed was in the generation just dropped.
        latestIsComplete = true
        // `latest` grows with the number of series. Past a generation's worth it is forgotten; until
        // the generation it did not see is dropped too, every point searches the generations.
        if latest.count >= Self.generationSize {
            latest.removeAll()
            latestIsComplete = false
        }
    }
}

/// A series' latest instant, and the slot of ``LatestInstants`` that holds it (`-1` for none).
struct LatestInstant {
    let instant: Int64?
    fileprivate let slot: Int
}

/// The latest instant per series, in open addressing (the series identities are hashes already), grown
/// by doubling while at most half full. A slot holds a series and its instant side by side, so a
/// lookup reads one cache line; an empty slot's instant is `Int64.min`, which no timestamp is
/// (InfluxDB's range ends 2 ns short of it).
private struct LatestInstants {
    private var slots: [(series: Int, instant: Int64)] = []
    private(set) var count = 0
    private static let empty = Int64.min

    func find(_ key: Int) -> LatestInstant {
        if count == 0 { return LatestInstant(instant: nil, slot: -1) }
        let mask = slots.count - 1
        var slot = key & mask
        while slots[slot].instant != Self.empty {
            if slots[slot].series == key { return LatestInstant(instant: slots[slot].instant, slot: slot) }
            slot = (slot + 1) & mask
        }
        return LatestInstant(instant: nil, slot: -1)
    }

    /// Sets `key`'s instant where `found` (looked up for `key`, with nothing set since) says it is.
    mutating func set(_ instant: Int64, for key: Int, found: LatestInstant) {
        guard found.slot >= 0 else { return set(instant, for: key) }
        slots[found.slot].instant = instant
    }

    mutating func set(_ instant: Int64, for key: Int) {
        // Never a timestamp (see above); were it one, it would be below every other anyway.
        guard instant != Self.empty else { return }
        if (count + 1) * 2 > slots.count { grow() }
        let mask = slots.count - 1
        var slot = key & mask
        while slots[slot].instant != Self.empty {
            if slots[slot].series == key {
                slots[slot].instant = instant
                return
            }
            slot = (slot + 1) & mask
        }
        slots[slot] = (key, instant)
        count += 1
    }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: (0, Self.empty), count: max(64, old.count * 2))
        count = 0
        for entry in old where entry.instant != Self.empty { set(entry.instant, for: entry.series) }
    }

    mutating func removeAll() {
        slots = []
        count = 0
    }
}

/// A set of (series, instant) pairs in open addressing, sized for one generation.
///
/// Each pair is kept as a 64-bit fingerprint only. Two pairs sharing a fingerprint (about one chance
/// in 2⁶⁴) would only nudge a timestamp that needed no nudge.
private struct InstantTable {
    private var fingerprints: [UInt64]
    private(set) var count = 0
    private let mask: Int

    init() {
        // A power of two at least 2.5 times the generation, so probes stay short.
        var capacity = 1
        while capacity < RecentInstants.generationSize * 5 / 2 { capacity <<= 1 }
        fingerprints = []
        mask = capacity - 1
    }

    /// A well-mixed, nonzero 64-bit value for the pair (zero marks an empty slot).
    static func fingerprint(_ series: Int, _ timestamp: Int64) -> UInt64 {
        let z = mix64(UInt64(bitPattern: Int64(series)) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: timestamp))
        return z == 0 ? 1 : z
    }

    func contains(_ fingerprint: UInt64) -> Bool {
        if fingerprints.isEmpty { return false }
        var slot = Int(truncatingIfNeeded: fingerprint) & mask
        while true {
            let stored = fingerprints[slot]
            if stored == fingerprint { return true }
            if stored == 0 { return false }
            slot = (slot + 1) & mask
        }
    }

    mutating func insert(_ fingerprint: UInt64) {
        // Allocated on first use, so an agent that records nothing holds nothing.
        if fingerprints.isEmpty { fingerprints = Array(repeating: 0, count: mask + 1) }
        var slot = Int(truncatingIfNeeded: fingerprint) & mask
        while true {
            let stored = fingerprints[slot]
            if stored == fingerprint { return }
            if stored == 0 { break }
            slot = (slot + 1) & mask
        }
        fingerprints[slot] = fingerprint
        count += 1
    }

    mutating func removeAll() {
        if count == 0 { return }
        for index in fingerprints.indices { fingerprints[index] = 0 }
        count = 0
    }
}
