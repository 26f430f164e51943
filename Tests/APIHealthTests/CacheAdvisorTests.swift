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
        _ headers: [String: String] = [:]
    ) -> CachePolicy {
        CachePolicy(method: method, statusCode: status) { name in
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    @Test func headersSayWhetherAndHowLongAClientMayKeepAResponse() {
        let plain = Self.policy()
        #expect(plain.storable && plain.freshFor == nil && !plain.validator && !plain.noStore)
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

    @Test func aRepeatedBodyIsJudgedWithTheAgeOfThePreviousOne() {
        let advisor = CacheAdvisor(capacity: 8)
        let same = Self.digest(Array("{\"items\":[1,2,3]}".utf8))
        let other = Self.digest(Array("{\"items\":[1,2,4]}".utf8))
        let storable = Self.policy()
        var verdict = advisor.judge(url: "https://a/x?q=1", statusCode: 200, policy: storable, digest: same, at: .zero)
        #expect(verdict == CacheAdvisor.Verdict(storable: true), "the first response of a URL is new")
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: same,
            at: .seconds(5)
        )
        #expect(verdict.repeated && verdict.ageBucket == 1, "5 s old: a 10 s lifetime would have served it")
        verdict = advisor.judge(
            url: "https://a/x?q=2",
            statusCode: 200,
            policy: storable,
            digest: same,
            at: .seconds(6)
        )
        #expect(!verdict.repeated, "the same body under another query string is another URL")
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: other,
            at: .seconds(7)
        )
        #expect(!verdict.repeated, "a changed body")
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: other,
            at: .seconds(4_000)
        )
        #expect(verdict.repeated && verdict.ageBucket == CacheAdvisor.ageBounds.count, "older than an hour")
        // A body not read to its end is compared with nothing and replaces nothing.
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: nil,
            at: .seconds(4_001)
        )
        #expect(!verdict.repeated)
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: other,
            at: .seconds(4_002)
        )
        #expect(verdict.repeated && verdict.ageBucket == 1, "2 s after the last body read to its end")
        // A 304 is a revalidation; the body it confirms counts as received then.
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 304,
            policy: storable,
            digest: nil,
            at: .seconds(4_100)
        )
        #expect(verdict.revalidated && !verdict.repeated)
        verdict = advisor.judge(
            url: "https://a/x?q=1",
            statusCode: 200,
            policy: storable,
            digest: other,
            at: .seconds(4_101)
        )
        #expect(verdict.repeated && verdict.ageBucket == 0)
        // A response sent with no-store is compared all the same (what a cache would have served had the
        // server allowed it), and counted as not storable.
        let noStore = Self.policy("GET", 200, ["Cache-Control": "no-store"])
        verdict = advisor.judge(url: "https://a/y", statusCode: 200, policy: noStore, digest: same, at: .seconds(4_102))
        #expect(verdict == CacheAdvisor.Verdict())
        verdict = advisor.judge(url: "https://a/y", statusCode: 200, policy: noStore, digest: same, at: .seconds(4_103))
        #expect(verdict == CacheAdvisor.Verdict(storable: false, repeated: true, ageBucket: 0))
        // A response no cache could keep (a POST, a 500 without a lifetime) is never compared, and leaves the
        // table as it was.
        verdict = advisor.judge(
            url: "https://a/z",
            statusCode: 200,
            policy: Self.policy("POST"),
            digest: same,
            at: .zero
        )
        #expect(verdict == CacheAdvisor.Verdict())
        verdict = advisor.judge(
            url: "https://a/z",
            statusCode: 500,
            policy: Self.policy("GET", 500),
            digest: same,
            at: .zero
        )
        #expect(verdict == CacheAdvisor.Verdict())
        #expect(advisor.count == 3)
    }

    @Test func theAgeBoundsAreInclusive() {
        #expect(CacheAdvisor.ageBucket(of: .zero) == 0)
        #expect(CacheAdvisor.ageBucket(of: .seconds(1)) == 0)
        #expect(CacheAdvisor.ageBucket(of: .milliseconds(1_001)) == 1)
        #expect(CacheAdvisor.ageBucket(of: .seconds(60)) == 2)
        #expect(CacheAdvisor.ageBucket(of: .seconds(3_600)) == 4)
        #expect(CacheAdvisor.ageBucket(of: .seconds(3_601)) == 5)
    }

    @Test func aHundredThousandURLsKeepTheTableAtItsBoundAndTheRecentOnes() {
        let advisor = CacheAdvisor(capacity: 1_000)
        let body = Self.digest(Array("same".utf8))
        let policy = Self.policy()
        for index in 0..<100_000 {
            _ = advisor.judge(url: "https://a/items/\(index)", statusCode: 200, policy: policy, digest: body, at: .zero)
            // The first URL, seen again all along, is never the least recently seen.
            let again = advisor.judge(
                url: "https://a/items/0",
                statusCode: 200,
                policy: policy,
                digest: body,
                at: .zero
            )
            #expect(index == 0 || again.repeated, "the first URL was evicted at \(index)")
            if index % 10_000 == 0 { #expect(advisor.count <= 1_000) }
        }
        #expect(advisor.count == 1_000)
        #expect(advisor.evicted == 99_000)
        // The 999 URLs seen last are there; the one before them is not.
        #expect(
            advisor.judge(url: "https://a/items/99999", statusCode: 200, policy: policy, digest: body, at: .zero)
                .repeated
        )
        #expect(
            advisor.judge(url: "https://a/items/99001", statusCode: 200, policy: policy, digest: body, at: .zero)
                .repeated
        )
        #expect(
            !advisor.judge(url: "https://a/items/99000", statusCode: 200, policy: policy, digest: body, at: .zero)
                .repeated
        )
    }

    @Test func verdictsAddUpToCumulativeFieldsPerLifetime() {
        var counts = CacheCounts()
        #expect(counts.isEmpty)
        let storable = Self.policy("GET", 200, ["Cache-Control": "max-age=60"])
        let noStore = Self.policy("GET", 200, ["Cache-Control": "no-store"])
        counts.add(CacheAdvisor.Verdict(storable: true), policy: storable, servedLocally: false, nanoseconds: 5_000_000)
        counts.add(
            CacheAdvisor.Verdict(storable: true, repeated: true, ageBucket: 0),
            policy: storable,
            servedLocally: false,
            nanoseconds: 10_000_000
        )
        counts.add(
            CacheAdvisor.Verdict(storable: true, repeated: true, ageBucket: 2),
            policy: storable,
            servedLocally: true,
            nanoseconds: 30_000_000
        )
        counts.add(
            CacheAdvisor.Verdict(storable: true, repeated: true, ageBucket: CacheAdvisor.ageBounds.count),
            policy: storable,
            servedLocally: false,
            nanoseconds: 100_000_000
        )
        counts.add(CacheAdvisor.Verdict(), policy: noStore, servedLocally: false, nanoseconds: 1)
        counts.add(CacheAdvisor.Verdict(revalidated: true), policy: storable, servedLocally: false, nanoseconds: 1)
        let fields = Dictionary(uniqueKeysWithValues: counts.fields().map { ($0.key, $0.value) })
        #expect(Set(fields.keys) == Set(PointSchema.cacheIntervalFields))
        #expect(counts.fields().map(\.key) == PointSchema.cacheIntervalFields)
        typealias F = PointSchema.IntervalField
        #expect(fields[F.cacheStorable] == .int(4))
        #expect(fields[F.cacheNoStore] == .int(1))
        #expect(fields[F.cacheWithLifetime] == .int(5))
        #expect(fields[F.cacheRevalidated] == .int(1))
        #expect(fields[F.cacheServedLocally] == .int(1))
        #expect(fields[F.cacheRepeated(withinSeconds: 1)] == .int(1))
        #expect(fields[F.cacheRepeated(withinSeconds: 10)] == .int(1))
        #expect(fields[F.cacheRepeated(withinSeconds: 60)] == .int(2))
        #expect(fields[F.cacheRepeated(withinSeconds: 3_600)] == .int(2))
        #expect(fields[F.cacheRepeated] == .int(3))
        #expect(fields[F.cacheRepeatedMilliseconds(withinSeconds: 1)] == .float(10))
        #expect(fields[F.cacheRepeatedMilliseconds(withinSeconds: 60)] == .float(40))
        #expect(fields[F.cacheRepeatedMilliseconds] == .float(140))
    }
}
