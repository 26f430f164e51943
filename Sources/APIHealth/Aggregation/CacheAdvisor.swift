import LineProtocol

/// What a private cache would have done with each response, simulated once per candidate lifetime
/// (``ageBounds``: 1, 10, 60, 300 and 3,600 s): it stores a copy when it fetches, serves that copy while it
/// is fresh (RFC 9111 section 4.2: its age — the `Age` it came with plus the time since — below the
/// lifetime) and fetches again once it is not. A response the simulated cache would have served is a *hit*
/// when the server's body was identical to the copy, and *stale* when it had changed.
///
/// Requests of one key in flight together are apart: a request that starts before the previous one of
/// its key has ended is *coalescable* (no lifetime serves it; coalescing duplicates would), never a hit.
///
/// The key is a 128-bit hash of the method, the URL (query included) and the request headers the
/// response's `Vary` names: the table never holds a URL's text, and each entry has the same size whatever
/// the URL's length (``bytesPerEntry``). At most ``capacity`` keys are held, the least recently seen
/// evicted and counted. It is used by one thread only, the agent's record loop: it has no lock of
/// its own.
///
/// ```swift
/// let advisor = CacheAdvisor(capacity: 5_000)
/// let verdict = advisor.judge(key: key, statusCode: 200, policy: policy, digest: digest, at: now,
///                             startedAt: started, endedAt: ended)
/// if verdict.hits & 0b100 != 0 { print("a max-age of 60 s would have served it") }
/// ```
package final class CacheAdvisor: @unchecked Sendable {
    /// Keys the table holds by default: about 1 MiB (``bytesPerEntry`` each).
    package static let defaultCapacity = 5_000
    /// The candidate lifetimes, in seconds, each simulated as a cache of its own.
    package static let ageBounds = PointSchema.IntervalField.cacheAgeBounds
    /// The most bytes one key takes in the table: its entry and its place in the index, whatever the
    /// URL's length. The table takes at most `capacity × bytesPerEntry`.
    package static let bytesPerEntry = 256

    /// One response's key: a 128-bit hash of what a cache keys it by.
    package struct Key: Hashable, Sendable {
        package var high: UInt64
        package var low: UInt64

        /// The key of a request to `url` (its whole text) with `method`, `vary` the digest of the request
        /// header values the response's `Vary` names (``CachePolicy/varyDigest``).
        package init(method: String, url: String, vary: UInt64) {
            var first = BodyDigest(seed: 0x243F_6A88_85A3_08D3)
            var second = BodyDigest(seed: 0x1319_8A2E_0370_7344)
            // The method's length first: "GET" and a URL never read as another method and URL.
            var separated = (vary, UInt64(method.utf8.count))
            withUnsafeBytes(of: &separated) { bytes in
                first.update(bytes)
                second.update(bytes)
            }
            var method = method
            var url = url
            method.withUTF8 { bytes in
                first.update(UnsafeRawBufferPointer(bytes))
                second.update(UnsafeRawBufferPointer(bytes))
            }
            url.withUTF8 { bytes in
                first.update(UnsafeRawBufferPointer(bytes))
                second.update(UnsafeRawBufferPointer(bytes))
            }
            high = first.value
            low = second.value
        }
    }

    /// What one response was, for the cache advisor.
    package struct Verdict: Sendable, Hashable {
        /// A cache may store it (``CachePolicy/storable``).
        package var storable = false
        /// A 304: a cache revalidated what it held.
        package var revalidated = false
        /// It entered the simulation: a response a cache could keep, its body read to its end, not a
        /// local cache's, not in flight beside an earlier request of its key.
        package var judged = false
        /// It started before the previous request of its key had ended.
        package var coalescable = false
        /// Bit `i` set: a cache with lifetime `ageBounds[i]` would have served the identical body.
        package var hits: UInt8 = 0
        /// Bit `i` set: a cache with lifetime `ageBounds[i]` would have served a copy the server had changed.
        package var stale: UInt8 = 0
        /// A key was evicted to make room for this one.
        package var evicted = false
    }

    /// What one simulated cache holds for a key.
    private struct Copy {
        /// The digest of the copy's body.
        var digest: UInt64
        /// When it was stored or last confirmed (a 304), on the agent's monotonic clock, in nanoseconds.
        var storedAt: Int64
        /// Its age then, in seconds (the `Age` it came with, at most 2³¹).
        var ageWhenStored: UInt32
    }

    private struct Entry {
        var key: Key
        /// When the last request of the key ended, wall clock, in nanoseconds since 1970.
        var lastEnded: Int64
        var copies: (Copy, Copy, Copy, Copy, Copy)
        var newer: Int32
        var older: Int32
    }

    /// How many keys the table holds at most.
    package let capacity: Int
    /// Keys evicted to make room, since the start.
    package private(set) var evicted: UInt64 = 0
    private var slots: [Key: Int32] = [:]
    private var entries: [Entry] = []
    /// The most and least recently seen entries (-1: none).
    private var newest: Int32 = -1
    private var oldest: Int32 = -1

    /// An empty table of at most `capacity` keys (at least one, at most 2²⁴); its storage is reserved for
    /// all of them at the first key.
    package init(capacity: Int = CacheAdvisor.defaultCapacity) {
        self.capacity = min(max(1, capacity), 1 << 24)
    }

    /// Keys held now.
    package var count: Int { slots.count }

    /// The bytes the table's storage takes: its entries and its index, as reserved.
    package var reservedBytes: Int {
        entries.capacity * MemoryLayout<Entry>.stride
            + slots.capacity * (MemoryLayout<Key>.stride + MemoryLayout<Int32>.stride) * 4 / 3
    }

    /// Judges one response of `key` with `statusCode`. `digest` is its body's, `nil` when the body was not
    /// read to its end (then it is compared with nothing and replaces nothing); `now` is when it ended on the
    /// agent's monotonic clock; `startedAt` and `endedAt` are when the request started and ended on the wall
    /// clock, in nanoseconds since 1970 (what tells requests in flight together apart).
    package func judge(
        key: Key,
        statusCode: Int,
        policy: CachePolicy,
        digest: BodyDigest?,
        at now: Duration,
        startedAt: Int64,
        endedAt: Int64
    ) -> Verdict {
        var verdict = Verdict(storable: policy.storable)
        let nowNanoseconds = now.nanoseconds
        if statusCode == 304 {
            verdict.revalidated = true
            // The stored copies were confirmed current: each as if it came again now, at age zero.
            if let slot = slots[key] {
                update(slot) { entry in
                    entry.lastEnded = max(entry.lastEnded, endedAt)
                    Self.forEachCopy(&entry.copies) { _, copy in
                        copy.storedAt = nowNanoseconds
                        copy.ageWhenStored = 0
                    }
                }
                touch(slot)
            }
            return verdict
        }
        guard policy.cacheableResponse, !policy.varyAll, let digest else { return verdict }
        let value = digest.value
        let fresh = Copy(digest: value, storedAt: nowNanoseconds, ageWhenStored: UInt32(clamping: policy.age))
        guard let slot = slots[key] else {
            verdict.judged = true
            verdict.evicted = insert(
                Entry(key: key, lastEnded: endedAt, copies: (fresh, fresh, fresh, fresh, fresh), newer: -1, older: -1)
            )
            return verdict
        }
        update(slot) { entry in
            if startedAt < entry.lastEnded {
                verdict.coalescable = true
            } else {
                verdict.judged = true
                Self.forEachCopy(&entry.copies) { index, copy in
                    let bit = UInt8(1) << UInt8(index)
                    let lifetime = Self.ageBounds[index] * 1_000_000_000
                    let (elapsed, late) = nowNanoseconds.subtractingReportingOverflow(copy.storedAt)
                    let (age, older) = (Int64(copy.ageWhenStored) * 1_000_000_000).addingReportingOverflow(
                        max(0, elapsed)
                    )
                    if !late, !older, age < lifetime {
                        if copy.digest == value { verdict.hits |= bit } else { verdict.stale |= bit }
                    } else {
                        copy = fresh
                    }
                }
            }
            entry.lastEnded = max(entry.lastEnded, endedAt)
        }
        touch(slot)
        return verdict
    }

    private static func forEachCopy(
        _ copies: inout (Copy, Copy, Copy, Copy, Copy),
        _ body: (Int, inout Copy) -> Void
    ) {
        body(0, &copies.0)
        body(1, &copies.1)
        body(2, &copies.2)
        body(3, &copies.3)
        body(4, &copies.4)
    }

    private func update(_ slot: Int32, _ body: (inout Entry) -> Void) {
        body(&entries[Int(slot)])
    }

    /// Inserts `entry`, evicting the least recently seen key when the table is full: returns whether it did.
    private func insert(_ entry: Entry) -> Bool {
        let slot: Int32
        var evictedOne = false
        if slots.count >= capacity, oldest >= 0 {
            slot = oldest
            unlink(slot)
            slots[entries[Int(slot)].key] = nil
            entries[Int(slot)] = entry
            evicted &+= 1
            evictedOne = true
        } else {
            if entries.isEmpty {
                entries.reserveCapacity(capacity)
                slots.reserveCapacity(capacity)
            }
            slot = Int32(entries.count)
            entries.append(entry)
        }
        slots[entry.key] = slot
        linkNewest(slot)
        return evictedOne
    }

    private func touch(_ slot: Int32) {
        guard slot != newest else { return }
        unlink(slot)
        linkNewest(slot)
    }

    private func unlink(_ slot: Int32) {
        let (newer, older) = (entries[Int(slot)].newer, entries[Int(slot)].older)
        if newer >= 0 { entries[Int(newer)].older = older } else { newest = older }
        if older >= 0 { entries[Int(older)].newer = newer } else { oldest = newer }
        entries[Int(slot)].newer = -1
        entries[Int(slot)].older = -1
    }

    private func linkNewest(_ slot: Int32) {
        entries[Int(slot)].older = newest
        entries[Int(slot)].newer = -1
        if newest >= 0 { entries[Int(newest)].newer = slot }
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
/// counts.add(verdict, policy: policy, servedLocally: false, nanoseconds: 42_000_000)
/// fields += counts.fields()
/// ```
package struct CacheCounts: Sendable, Hashable {
    package var storable: UInt64 = 0
    package var noStore: UInt64 = 0
    package var withLifetime: UInt64 = 0
    package var revalidated: UInt64 = 0
    package var servedLocally: UInt64 = 0
    package var judged: UInt64 = 0
    package var privateOnly: UInt64 = 0
    package var coalescable: UInt64 = 0
    package var coalescableNanoseconds: Int64 = 0
    /// Hits per candidate lifetime (``CacheAdvisor/ageBounds``).
    package var hits = [UInt64](repeating: 0, count: CacheAdvisor.ageBounds.count)
    /// Their waiting per candidate lifetime, in nanoseconds (saturating).
    package var hitsNanoseconds = [Int64](repeating: 0, count: CacheAdvisor.ageBounds.count)
    /// Stale responses per candidate lifetime.
    package var stale = [UInt64](repeating: 0, count: CacheAdvisor.ageBounds.count)

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
        if policy.perUser { privateOnly &+= 1 }
        let waiting = max(0, nanoseconds)
        if verdict.coalescable {
            coalescable &+= 1
            Self.add(waiting, to: &coalescableNanoseconds)
        }
        guard verdict.judged else { return }
        judged &+= 1
        for index in hits.indices {
            let bit = UInt8(1) << UInt8(index)
            if verdict.hits & bit != 0 {
                hits[index] &+= 1
                Self.add(waiting, to: &hitsNanoseconds[index])
            }
            if verdict.stale & bit != 0 { stale[index] &+= 1 }
        }
    }

    private static func add(_ nanoseconds: Int64, to sum: inout Int64) {
        let (total, overflow) = sum.addingReportingOverflow(nanoseconds)
        sum = overflow ? .max : total
    }

    /// The fields of an interval point, in the order ``PointSchema/cacheIntervalFields`` lists them.
    package func fields() -> [Point.Field] {
        typealias Field = PointSchema.IntervalField
        var fields: [Point.Field] = [
            Point.Field(Field.cacheStorable, .int(Int64(clamping: storable))),
            Point.Field(Field.cacheNoStore, .int(Int64(clamping: noStore))),
            Point.Field(Field.cacheWithLifetime, .int(Int64(clamping: withLifetime))),
            Point.Field(Field.cacheRevalidated, .int(Int64(clamping: revalidated))),
            Point.Field(Field.cacheServedLocally, .int(Int64(clamping: servedLocally))),
            Point.Field(Field.cacheJudged, .int(Int64(clamping: judged))),
            Point.Field(Field.cachePrivateOnly, .int(Int64(clamping: privateOnly))),
            Point.Field(Field.cacheCoalescable, .int(Int64(clamping: coalescable))),
            Point.Field(Field.cacheCoalescableMilliseconds, .float(Double(coalescableNanoseconds) / 1e6)),
        ]
        for (index, bound) in CacheAdvisor.ageBounds.enumerated() {
            fields.append(Point.Field(Field.cacheHits(lifetime: bound), .int(Int64(clamping: hits[index]))))
        }
        for (index, bound) in CacheAdvisor.ageBounds.enumerated() {
            fields.append(
                Point.Field(Field.cacheHitsMilliseconds(lifetime: bound), .float(Double(hitsNanoseconds[index]) / 1e6))
            )
        }
        for (index, bound) in CacheAdvisor.ageBounds.enumerated() {
            fields.append(Point.Field(Field.cacheStale(lifetime: bound), .int(Int64(clamping: stale[index]))))
        }
        return fields
    }
}
