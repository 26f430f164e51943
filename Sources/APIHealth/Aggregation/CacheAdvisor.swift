import LineProtocol

/// Which responses a cache would have served: per full URL (query included), the digest of the last
/// body and when it came, in a table of at most ``capacity`` URLs (the least recently seen evicted and
/// counted). Each response a cache could keep (``CachePolicy/cacheableResponse``: whatever `no-store` says, what a
/// cache would have served had the server allowed it) is judged against the previous one of its URL: identical or
/// not, and how old that previous one was — the lifetime a cache would have needed to serve it.
///
/// The table lives in memory only; URLs and digests are never written, only the counts and durations
/// the verdicts add up to. It is used by one thread at a time (the capture queue's drain, which runs one
/// at a time): it has no lock of its own.
///
/// ```swift
/// let advisor = CacheAdvisor(capacity: 10_000)
/// let verdict = advisor.judge(url: url, statusCode: 200, policy: policy, digest: digest, at: clock.now)
/// if verdict.repeated { savedWaiting += sample.duration }
/// ```
package final class CacheAdvisor: @unchecked Sendable {
    /// URLs the table holds by default: about 1 MiB with URLs of 60 bytes.
    package static let defaultCapacity = 10_000
    /// The upper bounds of the ages of a repeated response's previous one, in seconds: the lifetimes
    /// (`max-age`) that would have served it; an older one counts above the last.
    package static let ageBounds = PointSchema.IntervalField.cacheAgeBounds

    /// What one response was, for the cache advisor.
    package struct Verdict: Sendable, Hashable {
        /// A cache may store it (``CachePolicy/storable``).
        package var storable = false
        /// Its body is identical to the previous response of its URL.
        package var repeated = false
        /// For a repeated response, the index in ``CacheAdvisor/ageBounds`` of the first bound at or
        /// above the previous response's age (`ageBounds.count` when older than the last).
        package var ageBucket: Int?
        /// A 304: a cache revalidated what it held.
        package var revalidated = false
    }

    private struct Entry {
        var url: String
        var digest: UInt64
        var at: Duration
        var newer: Int
        var older: Int
    }

    /// How many URLs the table holds at most.
    package let capacity: Int
    /// URLs evicted to make room, since the start.
    package private(set) var evicted: UInt64 = 0
    private var slots: [String: Int] = [:]
    private var entries: [Entry] = []
    /// The most and least recently seen entries (-1: none).
    private var newest = -1
    private var oldest = -1

    /// An empty table of at most `capacity` URLs (at least one).
    package init(capacity: Int = CacheAdvisor.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// URLs held now.
    package var count: Int { slots.count }

    /// Judges one response of `url` (its whole text) with `statusCode`: `digest` is its body's, `nil`
    /// when the body was not read to its end (then it is compared with nothing and replaces nothing);
    /// `now` is when it ended, on a monotonic clock.
    package func judge(
        url: String,
        statusCode: Int,
        policy: CachePolicy,
        digest: BodyDigest?,
        at now: Duration
    )
        -> Verdict
    {
        var verdict = Verdict(storable: policy.storable)
        if statusCode == 304 {
            verdict.revalidated = true
            // The stored response was confirmed current: as if it came again now.
            if let slot = slots[url] {
                entries[slot].at = now
                touch(slot)
            }
            return verdict
        }
        guard policy.cacheableResponse, let digest else { return verdict }
        let value = digest.value
        if let slot = slots[url] {
            if entries[slot].digest == value {
                verdict.repeated = true
                verdict.ageBucket = Self.ageBucket(of: now - entries[slot].at)
            }
            entries[slot].digest = value
            entries[slot].at = now
            touch(slot)
        } else {
            insert(Entry(url: url, digest: value, at: now, newer: -1, older: -1))
        }
        return verdict
    }

    /// The index in ``ageBounds`` of the first bound at or above `age`.
    package static func ageBucket(of age: Duration) -> Int {
        let seconds = age.components.seconds
        let whole = age.components.attoseconds > 0 ? seconds + 1 : seconds
        return ageBounds.firstIndex { whole <= $0 } ?? ageBounds.count
    }

    private func insert(_ entry: Entry) {
        let slot: Int
        if slots.count >= capacity, oldest >= 0 {
            slot = oldest
            unlink(slot)
            slots[entries[slot].url] = nil
            entries[slot] = entry
            evicted &+= 1
        } else {
            slot = entries.count
            entries.append(entry)
        }
        slots[entry.url] = slot
        linkNewest(slot)
    }

    private func touch(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        linkNewest(slot)
    }

    private func unlink(_ slot: Int) {
        let (newer, older) = (entries[slot].newer, entries[slot].older)
        if newer >= 0 { entries[newer].older = older } else { newest = older }
        if older >= 0 { entries[older].newer = newer } else { oldest = newer }
        entries[slot].newer = -1
        entries[slot].older = -1
    }

    private func linkNewest(_ slot: Int) {
        entries[slot].older = newest
        entries[slot].newer = -1
        if newest >= 0 { entries[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}

/// One captured response as the cache advisor judged it, on its way to its endpoint's interval counts.
struct JudgedResponse: Sendable {
    var verdict: CacheAdvisor.Verdict
    var policy: CachePolicy
    var servedLocally: Bool
}

/// What the cache advisor's verdicts on one endpoint's responses add up to over an interval: the interval
/// point's `cache_*` fields.
///
/// ```swift
/// var counts = CacheCounts()
/// counts.add(verdict, nanoseconds: 42_000_000)
/// fields += counts.fields()
/// ```
package struct CacheCounts: Sendable, Hashable {
    package var storable: UInt64 = 0
    package var noStore: UInt64 = 0
    package var withLifetime: UInt64 = 0
    package var revalidated: UInt64 = 0
    package var servedLocally: UInt64 = 0
    /// Repeated responses per age bucket (not cumulative), one more than ``CacheAdvisor/ageBounds``.
    package var repeated = [UInt64](repeating: 0, count: CacheAdvisor.ageBounds.count + 1)
    /// Their waiting per age bucket, in nanoseconds (saturating).
    package var repeatedNanoseconds = [Int64](repeating: 0, count: CacheAdvisor.ageBounds.count + 1)

    /// No response yet.
    package init() {}

    /// Whether no response was counted.
    package var isEmpty: Bool { self == CacheCounts() }

    /// Adds one response's verdict; `nanoseconds` is how long it took.
    package mutating func add(
        _ verdict: CacheAdvisor.Verdict,
        policy: CachePolicy,
        servedLocally local: Bool,
        nanoseconds: Int64
    ) {
        if verdict.storable { storable &+= 1 }
        if policy.noStore { noStore &+= 1 }
        if let lifetime = policy.freshFor, lifetime > 0 { withLifetime &+= 1 }
        if verdict.revalidated { revalidated &+= 1 }
        if local { servedLocally &+= 1 }
        if verdict.repeated, let bucket = verdict.ageBucket {
            repeated[bucket] &+= 1
            let (sum, overflow) = repeatedNanoseconds[bucket].addingReportingOverflow(max(0, nanoseconds))
            repeatedNanoseconds[bucket] = overflow ? .max : sum
        }
    }

    /// The fields of an interval point, cumulative over the age bounds.
    package func fields() -> [Point.Field] {
        typealias Field = PointSchema.IntervalField
        var fields: [Point.Field] = [
            Point.Field(Field.cacheStorable, .int(Int64(clamping: storable))),
            Point.Field(Field.cacheNoStore, .int(Int64(clamping: noStore))),
            Point.Field(Field.cacheWithLifetime, .int(Int64(clamping: withLifetime))),
            Point.Field(Field.cacheRevalidated, .int(Int64(clamping: revalidated))),
            Point.Field(Field.cacheServedLocally, .int(Int64(clamping: servedLocally))),
        ]
        var count: UInt64 = 0
        for (index, bound) in CacheAdvisor.ageBounds.enumerated() {
            count &+= repeated[index]
            fields.append(Point.Field(Field.cacheRepeated(withinSeconds: bound), .int(Int64(clamping: count))))
        }
        count &+= repeated[CacheAdvisor.ageBounds.count]
        fields.append(Point.Field(Field.cacheRepeated, .int(Int64(clamping: count))))
        var nanoseconds: Int64 = 0
        for (index, bound) in CacheAdvisor.ageBounds.enumerated() {
            let (sum, overflow) = nanoseconds.addingReportingOverflow(repeatedNanoseconds[index])
            nanoseconds = overflow ? .max : sum
            fields.append(
                Point.Field(Field.cacheRepeatedMilliseconds(withinSeconds: bound), .float(Double(nanoseconds) / 1e6))
            )
        }
        let (sum, overflow) = nanoseconds.addingReportingOverflow(repeatedNanoseconds[CacheAdvisor.ageBounds.count])
        fields.append(Point.Field(Field.cacheRepeatedMilliseconds, .float(Double(overflow ? .max : sum) / 1e6)))
        return fields
    }
}
