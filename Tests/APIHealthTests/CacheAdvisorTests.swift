import Foundation
import LineProtocol
import TestSupport
import Testing

@testable import APIHealth

/// The cache advisor's parts on their own: the body digest taken chunk by chunk, what headers say about
/// caching, and the table of last bodies per URL with its bound.
@Suite struct CacheAdvisorTests {
    static func digest(_ bytes: [UInt8], splitAt cuts: [Int] = []) -> BodyDigest {
        var digest = BodyDigest()
        var start = 0
        for cut in cuts.sorted() + [bytes.count] where cut >= start {
            bytes[start..<cut].withUnsafeBytes { digest.update($0) }
            start = cut
        }
        return digest
    }

    @Test func aBodysDigestIsTheSameHoweverItsBytesAreSplit() {
        var generator = SeededGenerator(state: 48)
        for _ in 0..<RandomCases.count(500) {
            let length = Int.random(in: 0...300, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let whole = Self.digest(bytes)
            let cuts = (0..<Int.random(in: 0...12, using: &generator)).map { _ in
                Int.random(in: 0...length, using: &generator)
            }
            #expect(Self.digest(bytes, splitAt: cuts).value == whole.value, "\(length) bytes cut at \(cuts)")
            #expect(whole.length == UInt64(length))
            var sequence = BodyDigest()
            sequence.update(bytes)
            #expect(sequence.value == whole.value)
        }
    }

    @Test func aBodyDifferentInOneByteOrItsLengthHasAnotherDigest() {
        var generator = SeededGenerator(state: 9)
        var seen = Set<UInt64>()
        for length in 0..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let base = Self.digest(bytes).value
            #expect(seen.insert(base).inserted, "\(length) bytes")
            for position in 0..<length {
                var changed = bytes
                changed[position] ^= 1 << UInt8(position % 8)
                #expect(Self.digest(changed).value != base, "byte \(position) of \(length)")
            }
            #expect(Self.digest(bytes + [0]).value != base, "a zero byte more")
        }
    }

    static func policy(
        _ method: String = "GET",
        _ status: Int = 200,
        _ headers: [String: String] = [:],
        request: [String: String] = [:],
        receivedAt: Int64 = 1_795_860_000
    ) -> CachePolicy {
        CachePolicy(
            method: method,
            statusCode: status,
            requestHeader: { name in request.first { $0.key.lowercased() == name.lowercased() }?.value },
            receivedAt: receivedAt,
            header: { name in headers.first { $0.key.lowercased() == name.lowercased() }?.value }
        )
    }

    @Test func headersSayWhetherAndHowLongAClientMayKeepAResponse() {
        let plain = Self.policy()
        #expect(plain.storable && plain.freshFor == nil && !plain.validator && !plain.noStore && !plain.perUser)
        #expect(!Self.policy("GET", 200, ["Cache-Control": "no-store"]).storable)
        #expect(Self.policy("GET", 200, ["Cache-Control": "no-store"]).cacheableResponse)
        #expect(!Self.policy("POST").cacheableResponse)
        #expect(Self.policy("GET", 200, ["Cache-Control": "no-store"]).noStore)
        #expect(Self.policy("GET", 200, ["cache-control": "public, max-age=60"]).freshFor == 60)
        #expect(Self.policy("GET", 200, ["Cache-Control": "max-age=\"30\", s-maxage=600"]).freshFor == 30)
        #expect(Self.policy("GET", 200, ["Cache-Control": "max-age=soon"]).freshFor == 0, "malformed: stale")
        let noCache = Self.policy("GET", 200, ["Cache-Control": "no-cache", "ETag": "\"v1\""])
        #expect(noCache.storable && noCache.noCache && noCache.validator)
        let expires = Self.policy(
            "GET",
            200,
            ["Expires": "Sat, 28 Nov 2026 10:05:00 GMT", "Date": "Sat, 28 Nov 2026 10:00:00 GMT"]
        )
        #expect(expires.freshFor == 300)
        #expect(Self.policy("GET", 200, ["Expires": "0"]).freshFor == 0, "an invalid Expires has expired")
        #expect(Self.policy("GET", 200, ["Last-Modified": "Sat, 28 Nov 2026 09:00:00 GMT"]).validator)
        #expect(!Self.policy("POST").storable, "POST is never kept here")
        #expect(Self.policy("GET", 404).storable, "a 404 is cacheable by default")
        #expect(!Self.policy("GET", 500).storable)
        #expect(Self.policy("GET", 500, ["Cache-Control": "max-age=5"]).storable, "an explicit lifetime")
        #expect(!Self.policy("GET", 201).storable)
    }

    /// RFC 9111 section 1.2.2: "If a cache receives a delta-seconds value greater than the greatest integer it
    /// can represent, or if any of its subsequent calculations overflows, the cache MUST consider the value to
    /// be 2147483648 (2^31)". The same for `Age`.
    @Test func aLifetimeOrAgePastTwoToTheThirtyFirstIsCappedNotStale() {
        let huge = Self.policy("GET", 200, ["Cache-Control": "max-age=99999999999999999999999", "Age": "99999999999"])
        #expect(huge.freshFor == 2_147_483_648)
        #expect(huge.age == 2_147_483_648)
        #expect(Self.policy("GET", 200, ["Cache-Control": "max-age=3000000000"]).freshFor == 2_147_483_648)
        #expect(Self.policy("GET", 200, ["Age": "50"]).age == 50)
        #expect(Self.policy("GET", 200, ["Age": "-5"]).age == 0, "not a delta-seconds: no age")
    }

    /// RFC 9111 section 4.2.1: `Expires` minus `Date`; with no `Date` the time the response was received
    /// stands for it (section 4.2.3: the date_value is then the response_time).
    @Test func expiresWithoutDateCountsFromTheTimeReceived() {
        let received: Int64 = 1_795_860_000  // Sat, 28 Nov 2026 10:00:00 GMT
        let policy = Self.policy("GET", 200, ["Expires": "Sat, 28 Nov 2026 10:02:00 GMT"], receivedAt: received)
        #expect(policy.freshFor == 120, "not 0")
        #expect(policy.storable && policy.cacheableResponse)
        #expect(
            Self.policy("GET", 500, ["Expires": "Sat, 28 Nov 2026 10:02:00 GMT"], receivedAt: received)
                .cacheableResponse,
            "Expires makes a status storable that is not by default"
        )
    }

    /// RFC 9111 section 4.2.2: "if the response has a Last-Modified header field, caches are encouraged to use
    /// a heuristic expiration value that is no more than some fraction of the interval since that time. A
    /// typical setting of this fraction might be 10%." Only for a status cacheable by default, and never over
    /// an explicit lifetime.
    @Test func lastModifiedGivesTheTenPercentHeuristicLifetime() {
        let headers = ["Date": "Sat, 28 Nov 2026 10:00:00 GMT", "Last-Modified": "Fri, 27 Nov 2026 10:00:00 GMT"]
        let heuristic = Self.policy("GET", 200, headers)
        #expect(heuristic.freshFor == 8_640, "a tenth of a day")
        #expect(heuristic.heuristic)
        var stated = headers
        stated["Cache-Control"] = "max-age=5"
        #expect(Self.policy("GET", 200, stated).freshFor == 5 && !Self.policy("GET", 200, stated).heuristic)
        #expect(Self.policy("GET", 500, headers).freshFor == nil, "not cacheable by default: no heuristic")
        let noDate = Self.policy(
            "GET",
            200,
            ["Last-Modified": "Sat, 28 Nov 2026 09:00:00 GMT"],
            receivedAt: 1_795_860_000
        )
        #expect(noDate.freshFor == 360, "a tenth of the hour since, counted from the time received")
    }

    /// RFC 9111 section 5.2.2.4: "the qualified form of the no-cache response directive ... the specified
    /// field(s) MUST NOT be sent in the response to a subsequent request without successful revalidation";
    /// the rest of the response may be reused. The same for `private="…"` (section 5.2.2.7).
    @Test func qualifiedNoCacheAndPrivateNameFieldsNotTheResponse() {
        let qualified = Self.policy("GET", 200, ["Cache-Control": "no-cache=\"Set-Cookie\", max-age=60"])
        #expect(!qualified.noCache)
        #expect(Self.policy("GET", 200, ["Cache-Control": "no-cache"]).noCache)
        #expect(!Self.policy("GET", 200, ["Cache-Control": "private=\"X-User\""]).perUser)
        #expect(Self.policy("GET", 200, ["Cache-Control": "private, max-age=60"]).perUser)
    }

    /// RFC 9111 section 3.5: a shared cache "MUST NOT use a cached response to a request with an Authorization
    /// header field ... unless" the response has `public`, `s-maxage` or `must-revalidate`; and `public`
    /// (section 5.2.2.9) makes a response storable whatever its status.
    @Test func perUserResponsesAreForTheClientsOwnCacheOnly() {
        let authorization = ["Authorization": "Bearer abc"]
        #expect(Self.policy("GET", 200, request: authorization).perUser)
        #expect(!Self.policy("GET", 200, ["Cache-Control": "public"], request: authorization).perUser)
        #expect(!Self.policy("GET", 200, ["Cache-Control": "s-maxage=60"], request: authorization).perUser)
        #expect(!Self.policy("GET", 200, ["Cache-Control": "must-revalidate"], request: authorization).perUser)
        #expect(Self.policy("GET", 200, ["Cache-Control": "public"], request: ["Cookie": "session=1"]).perUser)
        #expect(Self.policy("GET", 200, ["Set-Cookie": "a=b"]).perUser)
        #expect(Self.policy("GET", 200, ["Vary": "Accept-Encoding, Cookie"]).perUser)
        #expect(Self.policy("GET", 200, ["Vary": "authorization"]).perUser)
        #expect(Self.policy("GET", 200, ["Vary": "*"]).perUser && Self.policy("GET", 200, ["Vary": "*"]).varyAll)
        #expect(!Self.policy("GET", 200, ["Vary": "Accept-Language"]).perUser)
        #expect(Self.policy("GET", 201, ["Cache-Control": "public"]).cacheableResponse, "public: storable")
        #expect(!Self.policy("GET", 201).cacheableResponse)
    }

    @Test func varyMakesEachVariantAKeyOfItsOwn() {
        let english = Self.policy("GET", 200, ["Vary": "Accept-Language"], request: ["Accept-Language": "en"])
        let french = Self.policy("GET", 200, ["Vary": "Accept-Language"], request: ["Accept-Language": "fr"])
        let englishAgain = Self.policy("GET", 200, ["Vary": "accept-language"], request: ["accept-language": "en"])
        #expect(english.varyDigest != french.varyDigest)
        #expect(english.varyDigest == englishAgain.varyDigest)
        #expect(Self.policy().varyDigest == 0)
        let url = "https://a/greeting"
        #expect(
            CacheAdvisor.Key(method: "GET", url: url, vary: english.varyDigest)
                != CacheAdvisor.Key(method: "GET", url: url, vary: french.varyDigest)
        )
        #expect(
            CacheAdvisor.Key(method: "GET", url: url, vary: 0) != CacheAdvisor.Key(method: "HEAD", url: url, vary: 0)
        )
        #expect(
            CacheAdvisor.Key(method: "GET", url: url, vary: 0) == CacheAdvisor.Key(method: "GET", url: url, vary: 0)
        )
    }

    /// A simulated run: `requests` (seconds after the start, and which body) to one key, each taking 10 ms
    /// and starting after the one before ended; returns the verdicts.
    static func run(
        _ requests: [(at: Double, body: String)],
        policy: CachePolicy = CacheAdvisorTests.policy(),
        advisor: CacheAdvisor = CacheAdvisor(capacity: 8),
        key: CacheAdvisor.Key = CacheAdvisor.Key(method: "GET", url: "https://a/x", vary: 0)
    ) -> [CacheAdvisor.Verdict] {
        requests.map { request in
            let ended = Int64(request.at * 1e9) + 10_000_000
            return advisor.judge(
                key: key,
                statusCode: 200,
                policy: policy,
                digest: digest(Array(request.body.utf8)),
                at: .nanoseconds(ended),
                startedAt: Int64(request.at * 1e9),
                endedAt: ended
            )
        }
    }

    /// Hits and stale responses per candidate lifetime (1, 10, 60, 300, 3,600 s) of `verdicts`.
    static func totals(_ verdicts: [CacheAdvisor.Verdict]) -> (hits: [Int], stale: [Int]) {
        let indices = CacheAdvisor.ageBounds.indices
        return (
            indices.map { index in verdicts.filter { $0.hits & (1 << UInt8(index)) != 0 }.count },
            indices.map { index in verdicts.filter { $0.stale & (1 << UInt8(index)) != 0 }.count }
        )
    }

    /// The example: requests every 5 s for a minute; a cache with `max-age=10` stores at 0 s, serves
    /// 5 s, must fetch again at 10 s (age 10 is not fresh), serves 15 s: every other one after the first.
    @Test func aCacheServesItsCopyWhileFreshAndFetchesAgainOnceStale() {
        let verdicts = Self.run((0..<12).map { (at: Double($0) * 5, body: "same") })
        let (hits, stale) = Self.totals(verdicts)
        #expect(hits == [0, 6, 11, 11, 11], "10 s: 5, 15, …, 55; 60 s: all but the first")
        #expect(stale == [0, 0, 0, 0, 0])
        #expect(verdicts.allSatisfy { $0.judged })
        #expect(!verdicts.contains { $0.coalescable })
    }

    @Test func aBodyThatChangedWhileTheCopyWasFreshIsStale() {
        let verdicts = Self.run((0..<12).map { (at: Double($0) * 5, body: $0 < 6 ? "before" : "after") })
        let (hits, stale) = Self.totals(verdicts)
        // 60 s and longer: the copy of 0 s served all along, changed from 30 s on.
        #expect(hits == [0, 6, 5, 5, 5])
        #expect(stale == [0, 0, 6, 6, 6], "stale at 60 s, not at 1 s or 10 s (10 s fetched again at 30 s)")
    }

    /// RFC 9111 section 4.2.3: a response's age includes the `Age` it came with: with `Age: 50` a copy is
    /// fresh for 10 more seconds under a 60 s lifetime, and never under 1 or 10 s.
    @Test func theAgeAResponseCameWithCountsAgainstTheLifetime() {
        let aged = Self.policy("GET", 200, ["Cache-Control": "max-age=60", "Age": "50"])
        let verdicts = Self.run((0..<6).map { (at: Double($0) * 5, body: "same") }, policy: aged)
        let (hits, _) = Self.totals(verdicts)
        // 60 s: stored at 0 (age 50), served at 5 (55), fetched at 10 (60), served at 15, fetched at 20, …
        #expect(hits == [0, 0, 3, 5, 5])
    }

    @Test func requestsInFlightTogetherAreCoalescableNeverHits() {
        let advisor = CacheAdvisor(capacity: 8)
        let key = CacheAdvisor.Key(method: "GET", url: "https://a/x", vary: 0)
        let body = Self.digest(Array("same".utf8))
        // Eight requests start together at 1 s and end one after another.
        let verdicts = (0..<8).map { index in
            let ended = 1_000_000_000 + Int64(index + 1) * 20_000_000
            return advisor.judge(
                key: key,
                statusCode: 200,
                policy: Self.policy(),
                digest: body,
                at: .nanoseconds(ended),
                startedAt: 1_000_000_000,
                endedAt: ended
            )
        }
        #expect(verdicts.filter(\.coalescable).count == 7)
        #expect(verdicts.filter(\.judged).count == 1)
        #expect(Self.totals(verdicts).hits == [0, 0, 0, 0, 0])
        // The next one, after they all ended, is served from the copy of the first.
        let next = advisor.judge(
            key: key,
            statusCode: 200,
            policy: Self.policy(),
            digest: body,
            at: .seconds(2),
            startedAt: 2_000_000_000,
            endedAt: 2_000_000_001
        )
        #expect(next.judged && !next.coalescable && next.hits == 0b11111, "0.98 s old: fresh even at 1 s")
    }

    @Test func aRevalidationRenewsTheCopiesAndUnreadBodiesAreNotJudged() {
        let advisor = CacheAdvisor(capacity: 8)
        let key = CacheAdvisor.Key(method: "GET", url: "https://a/x", vary: 0)
        let body = Self.digest(Array("same".utf8))
        func judge(_ status: Int, _ digest: BodyDigest?, at seconds: Int64) -> CacheAdvisor.Verdict {
            advisor.judge(
                key: key,
                statusCode: status,
                policy: Self.policy(),
                digest: digest,
                at: .seconds(seconds),
                startedAt: seconds * 1_000_000_000 - 1,
                endedAt: seconds * 1_000_000_000
            )
        }
        #expect(judge(200, body, at: 0).judged)
        #expect(judge(200, nil, at: 1) == CacheAdvisor.Verdict(storable: true), "unread: compared with nothing")
        #expect(judge(304, nil, at: 50).revalidated)
        // 20 s after the 304: fresh under 60 s, as if stored at 50 s.
        #expect(judge(200, body, at: 70).hits == 0b11100)
        let post = advisor.judge(
            key: CacheAdvisor.Key(method: "POST", url: "https://a/x", vary: 0),
            statusCode: 200,
            policy: Self.policy("POST"),
            digest: body,
            at: .zero,
            startedAt: 0,
            endedAt: 1
        )
        #expect(post == CacheAdvisor.Verdict(), "a POST is never judged")
        #expect(advisor.count == 1)
    }

    /// The table holds hashes of keys, never their text: 100,000 URLs of 2 KB (200 MB of text) leave it at its
    /// bound in entries and in bytes (``CacheAdvisor/bytesPerEntry`` each, its storage reserved once), and the
    /// process's resident memory grows by far less than the URLs' text.
    @Test func aHundredThousandLongURLsKeepTheTableWithinItsBoundInBytes() {
        let capacity = 1_000
        let advisor = CacheAdvisor(capacity: capacity)
        let body = Self.digest(Array("same".utf8))
        let padding = String(repeating: "p", count: 2_000)
        var reserved: Int?
        let before = residentBytes()
        for index in 0..<100_000 {
            let url = "https://a/items/\(index)?token=\(padding)"
            let verdict = advisor.judge(
                key: CacheAdvisor.Key(method: "GET", url: url, vary: 0),
                statusCode: 200,
                policy: Self.policy(),
                digest: body,
                at: .seconds(Int64(index)),
                startedAt: Int64(index) * 1_000_000_000,
                endedAt: Int64(index) * 1_000_000_000 + 1
            )
            #expect(verdict.evicted == (index >= capacity), "\(index)")
            if index == 0 { reserved = advisor.reservedBytes }
        }
        let grown = residentBytes() - before
        #expect(advisor.count == capacity)
        #expect(advisor.evicted == 99_000)
        #expect(advisor.reservedBytes == reserved, "reserved once, at the first key")
        #expect(
            advisor.reservedBytes <= capacity * CacheAdvisor.bytesPerEntry,
            "\(advisor.reservedBytes) bytes for \(capacity) keys"
        )
        #expect(grown < 16 << 20, "resident memory grew \(grown) bytes: URL text kept?")
    }

    @Test func verdictsAddUpToFieldsPerLifetime() {
        var counts = CacheCounts()
        #expect(counts.isEmpty)
        let storable = Self.policy("GET", 200, ["Cache-Control": "max-age=60"])
        let noStore = Self.policy("GET", 200, ["Cache-Control": "no-store"])
        let perUser = Self.policy("GET", 200, request: ["Authorization": "Bearer x"])
        counts.add(
            CacheAdvisor.Verdict(storable: true, judged: true),
            policy: storable,
            servedLocally: false,
            nanoseconds: 5_000_000
        )
        counts.add(
            CacheAdvisor.Verdict(storable: true, judged: true, hits: 0b11110, stale: 0b00001),
            policy: storable,
            servedLocally: false,
            nanoseconds: 10_000_000
        )
        counts.add(
            CacheAdvisor.Verdict(storable: true, judged: true, hits: 0b11100, stale: 0b00010),
            policy: perUser,
            servedLocally: false,
            nanoseconds: 30_000_000
        )
        counts.add(
            CacheAdvisor.Verdict(storable: true, coalescable: true),
            policy: storable,
            servedLocally: false,
            nanoseconds: 100_000_000
        )
        counts.add(CacheAdvisor.Verdict(), policy: noStore, servedLocally: false, nanoseconds: 1)
        counts.add(CacheAdvisor.Verdict(revalidated: true), policy: storable, servedLocally: false, nanoseconds: 1)
        counts.add(CacheAdvisor.Verdict(storable: true), policy: storable, servedLocally: true, nanoseconds: 1)
        let fields = Dictionary(uniqueKeysWithValues: counts.fields().map { ($0.key, $0.value) })
        #expect(counts.fields().map(\.key) == PointSchema.cacheIntervalFields)
        typealias F = PointSchema.IntervalField
        #expect(fields[F.cacheStorable] == .int(5))
        #expect(fields[F.cacheNoStore] == .int(1))
        #expect(fields[F.cacheWithLifetime] == .int(5))
        #expect(fields[F.cacheRevalidated] == .int(1))
        #expect(fields[F.cacheServedLocally] == .int(1))
        #expect(fields[F.cacheJudged] == .int(3))
        #expect(fields[F.cachePrivateOnly] == .int(1))
        #expect(fields[F.cacheCoalescable] == .int(1))
        #expect(fields[F.cacheCoalescableMilliseconds] == .float(100))
        #expect(fields[F.cacheHits(lifetime: 1)] == .int(0))
        #expect(fields[F.cacheHits(lifetime: 10)] == .int(1))
        #expect(fields[F.cacheHits(lifetime: 60)] == .int(2))
        #expect(fields[F.cacheHitsMilliseconds(lifetime: 10)] == .float(10))
        #expect(fields[F.cacheHitsMilliseconds(lifetime: 3_600)] == .float(40))
        #expect(fields[F.cacheStale(lifetime: 1)] == .int(1))
        #expect(fields[F.cacheStale(lifetime: 10)] == .int(1))
        #expect(fields[F.cacheStale(lifetime: 60)] == .int(0))
    }
}
