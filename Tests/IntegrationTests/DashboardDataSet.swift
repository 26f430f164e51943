import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LineProtocol
import Logging
import TestSupport

@_spi(Benchmarking) @_spi(Package) @testable import APIHealth

/// The query files in `dashboards/`, read as the dashboards carry them.
enum DashboardFiles {
    static let folder = repositoryRoot.appendingPathComponent("dashboards")

    /// Every file in `folder` (under `dashboards/`) whose name ends in `suffix`, by name.
    static func files(_ folder: String, _ suffix: String) throws -> [(name: String, text: String)] {
        let directory = Self.folder.appendingPathComponent(folder)
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(suffix) }
            .sorted()
            .map { ($0, try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8)) }
    }

    static func flux(_ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent("flux/\(name).flux"), encoding: .utf8)
    }

    /// The statements of an InfluxQL file, without its comment lines (as the dashboard carries them).
    static func influxQL(_ name: String) throws -> String {
        statements(try String(contentsOf: folder.appendingPathComponent("influxql/\(name).influxql"), encoding: .utf8))
    }

    static func statements(_ influxQL: String) -> String {
        influxQL.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
    }

    static func json(_ path: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(path)))
    }

    /// The first capture group of every match of `pattern` in `text`.
    static func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// The first two capture groups of every match of `pattern` in `text`.
    static func pairs(_ pattern: String, in text: String) -> [(String, String)] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            guard let first = Range(match.range(at: 1), in: text), let second = Range(match.range(at: 2), in: text)
            else { return nil }
            return (String(text[first]), String(text[second]))
        }
    }
}

/// A known set of requests made by a fleet of three replicas over six 10 s intervals, recorded through real
/// agents into a real server: what the dashboards' numbers are checked against.
enum DashboardDataSet {
    struct Sample {
        var instance: String
        var host: String
        var method: String
        var path: String
        var rawPath: String
        var module: String
        var status: Int?
        /// Milliseconds.
        var duration: Double
        /// Which of the six intervals the request was made in.
        var interval: Int
        /// Seconds after the interval's start.
        var offset: Double
        /// The response's `Cache-Control` header, if it had one.
        var cacheControl: String?
        /// Whether the cache advisor found that a cache may store the response.
        var storable: Bool
        /// For a judged response a simulated cache would have served from its copy, how many seconds old that
        /// copy was: each lifetime above that would have served it; `nil` for one no lifetime serves.
        var servedAge: Double?
        /// Whether the copy it would have been served from had another body (stale, not a hit).
        var changed = false
        /// One user's response (an `Authorization` header).
        var perUser = false
        /// Requested while the same request was in flight: coalescable, not judged.
        var coalescable = false

        var failed: Bool { (status ?? 600) >= 400 }
        var noStore: Bool { cacheControl == "no-store" }
        var statusClass: String { status.map { "\($0 / 100)xx" } ?? "error" }
        var statusTag: String { status.map { "\($0)" } ?? "error" }
        var endpoint: String { "\(host) \(method) \(path)" }
    }

    static let instances = ["replica-1", "replica-2", "replica-3"]
    static let environments = ["replica-1": "prod", "replica-2": "prod", "replica-3": "staging"]
    /// The replica that writes interval points only (`capture.rawPoints = .none`): the fleet panels count its
    /// requests, the raw-point panels never see them.
    static let aggregatesOnly = "replica-3"
    static let intervals = 6
    static let intervalSeconds: Int64 = 10
    /// The replicas whose interval points carry the cache fields (`capture.cacheAdvice`) in
    /// ``recordGivingCacheAdvice(_:through:intervalEnds:)``: replica-3 (the staging one) gives no cache advice.
    static let cacheAdvice: Set<String> = ["replica-1", "replica-2"]
    /// The ages of the copies a simulated cache would have served, in seconds: on both sides of the lifetimes.
    static let repeatAges: [Double] = [0.5, 1, 7, 10, 42, 60, 61, 240, 300, 1_200, 3_600, 86_400]

    static func samples() -> [Sample] {
        (0..<240).map { index in
            let users = index % 2 == 0
            let status: Int? = index % 23 == 0 ? nil : index % 10 == 0 ? 500 : index % 17 == 0 ? 404 : 200
            // The users endpoint answers some requests with no-store and some with a lifetime; a cache may store
            // its successful responses but the no-store ones, and two in three of those repeat the previous
            // response of their URL. The search endpoint (POST) is never stored.
            let cacheControl: String? =
                !users ? nil : index % 9 == 4 ? "no-store" : index % 4 == 2 ? "max-age=60" : nil
            let storable = users && status == 200 && cacheControl != "no-store"
            return Sample(
                instance: instances[(index / 5) % 3],
                host: index % 3 == 0 ? "api-b.example.com" : "api-a.example.com",
                method: users ? "GET" : "POST",
                path: users ? "/users/{id}" : "/search",
                rawPath: users ? "/users/\(1_000 + index)" : "/search",
                module: users ? "accounts" : "search",
                status: status,
                duration: index % 7 == 3 ? 250 + Double(index) * 1.5 : Double((index * 37) % 101) + 0.25,
                interval: index / 40,
                offset: Double(index % 40) * 0.25,
                cacheControl: cacheControl,
                storable: storable,
                servedAge: storable && index % 3 != 2 && index % 13 != 6
                    ? repeatAges[(index / 2) % repeatAges.count] : nil,
                changed: index % 19 == 4,
                perUser: users && index % 8 == 0,
                coalescable: storable && index % 13 == 6
            )
        }
    }

    /// The columns of the "What to cache" panel after the endpoint's host, method and path.
    static let whatToCacheColumns = [
        "judged", "ttl_s", "hit_share", "stale_share", "saved_ms", "private_only", "coalescable", "no_store",
    ]

    /// The verdict of the cache advisor on `sample`.
    static func verdict(_ sample: Sample) -> CacheAdvisor.Verdict {
        var verdict = CacheAdvisor.Verdict(storable: sample.storable)
        guard sample.storable else { return verdict }
        verdict.coalescable = sample.coalescable
        verdict.judged = !sample.coalescable
        if let age = sample.servedAge, verdict.judged {
            for (index, lifetime) in CacheAdvisor.ageBounds.enumerated() where age < Double(lifetime) {
                if sample.changed { verdict.stale |= 1 << UInt8(index) } else { verdict.hits |= 1 << UInt8(index) }
            }
        }
        return verdict
    }

    /// What the "What to cache" panel shows for an endpoint with `samples`: its columns by name. The advised
    /// lifetime is the longest with a hit whose stale responses stay under 1 % of those judged (0 without one).
    static func whatToCache(_ samples: [Sample]) -> [String: Double] {
        let verdicts = samples.map(verdict)
        let judged = Double(verdicts.filter(\.judged).count)
        var advised: (ttl: Double, hits: Double, stale: Double, saved: Double) = (0, 0, 0, 0)
        for (index, lifetime) in CacheAdvisor.ageBounds.enumerated() {
            let bit = UInt8(1) << UInt8(index)
            let hits = zip(samples, verdicts).filter { $0.1.hits & bit != 0 }
            let stale = Double(verdicts.filter { $0.stale & bit != 0 }.count)
            if !hits.isEmpty && stale * 100 < judged {
                advised = (Double(lifetime), Double(hits.count), stale, hits.map(\.0.duration).reduce(0, +))
            }
        }
        return [
            "judged": judged,
            "ttl_s": advised.ttl,
            "hit_share": advised.hits / max(judged, 1),
            "stale_share": advised.stale / max(judged, 1),
            "saved_ms": advised.saved,
            "private_only": Double(samples.filter(\.perUser).count),
            "coalescable": Double(verdicts.filter(\.coalescable).count),
            "no_store": Double(samples.filter(\.noStore).count),
        ]
    }

    /// The cache fields an agent giving cache advice adds to the interval point of `samples` (``CacheCounts``).
    static func cacheFields(of samples: [Sample]) -> [Point.Field] {
        var counts = CacheCounts()
        for sample in samples {
            let policy = CachePolicy(
                method: sample.method,
                statusCode: sample.status ?? 0,
                requestHeader: { $0 == "Authorization" && sample.perUser ? "Bearer user" : nil },
                header: { $0 == "Cache-Control" ? sample.cacheControl : nil }
            )
            counts.add(verdict(sample), policy: policy, servedLocally: false, nanoseconds: Int64(sample.duration * 1e6))
        }
        return counts.fields()
    }

    /// The samples written as raw points too.
    static func rawSamples() -> [Sample] { samples().filter { $0.instance != aggregatesOnly } }

    /// The end of each interval, in seconds since the epoch: whole multiples of 10 s, the last a few minutes ago.
    static func intervalEnds(now: Date = Date()) -> [Int64] {
        let first = (Int64(now.timeIntervalSince1970) / intervalSeconds - 60) * intervalSeconds
        return (0..<intervals).map { first + Int64($0) * intervalSeconds }
    }

    /// One agent per replica, writing to `destination` under the service `service`.
    static func agents(
        service: String,
        destination: InfluxDestination,
        precision: Precision = .ns,
        rawPoints: (String) -> RawPoints = { $0 == aggregatesOnly ? .none : .all }
    ) throws -> [String: APIHealthAgent] {
        var agents: [String: APIHealthAgent] = [:]
        for instance in instances {
            var configuration = APIHealthConfiguration(serviceName: service, destination: destination)
            configuration.instance = instance
            configuration.globalTags = ["env": environments[instance]!]
            configuration.precision = precision
            configuration.spool = nil
            configuration.capture.rawPoints = rawPoints(instance)
            // The intervals are ended by the test, never by the clock.
            agents[instance] = try APIHealthAgent(
                configuration: configuration,
                logger: Logger(label: service),
                clock: ManualClock()
            )
        }
        return agents
    }

    /// Records every sample through its replica's agent, each at its time in its interval, and ends each interval
    /// at its end in every agent; parse failures for some successful requests. Returns the parse failures made,
    /// by "host module path".
    @discardableResult
    static func record(
        _ samples: [Sample],
        through agents: [String: APIHealthAgent],
        intervalEnds: [Int64]
    ) -> [String: Int] {
        record(samples, through: agents, intervalEnds: intervalEnds, cacheAdvice: []).parseFailures
    }

    /// Records the samples as ``record(_:through:intervalEnds:)`` does, and returns with the parse failures the
    /// cache fields the interval points of the replicas in ``cacheAdvice`` carry when the agent gives cache advice:
    /// per interval point, a point of the same series and time with the cache fields of its samples only, which
    /// the server merges with the agent's. They are for the test to write to the server itself: an agent nudges a
    /// second point of a series at the same instant to the next free one.
    static func recordGivingCacheAdvice(
        _ samples: [Sample],
        through agents: [String: APIHealthAgent],
        intervalEnds: [Int64]
    ) -> (parseFailures: [String: Int], cacheFields: [Point]) {
        record(samples, through: agents, intervalEnds: intervalEnds, cacheAdvice: cacheAdvice)
    }

    /// `points` as line protocol, timestamps in nanoseconds.
    static func lines(_ points: [Point]) throws -> [UInt8] {
        var lines: [UInt8] = []
        let encoder = LineEncoder()
        for point in points { try encoder.encode(point, into: &lines) }
        return lines
    }

    private static func record(
        _ samples: [Sample],
        through agents: [String: APIHealthAgent],
        intervalEnds: [Int64],
        cacheAdvice: Set<String>
    ) -> (parseFailures: [String: Int], cacheFields: [Point]) {
        var parseFailures: [String: Int] = [:]
        var cacheFields: [Point] = []
        // Handed each interval's points by `recordIntervalPoints`, before it returns.
        let taken = Locked<[String: [Point]]>([:])
        for instance in cacheAdvice {
            agents[instance]!.observeIntervalPoints { points in
                taken.withLock { $0[instance, default: []] += points }
            }
        }
        for interval in 0..<intervals {
            let end = intervalEnds[interval]
            for (index, sample) in samples.enumerated() where sample.interval == interval {
                let agent = agents[sample.instance]!
                let url = URL(string: "https://\(sample.host)\(sample.rawPath)")!
                agent.record(
                    RequestSample(
                        method: sample.method,
                        url: url,
                        module: sample.module,
                        startedAt: Date(timeIntervalSince1970: Double(end - intervalSeconds) + sample.offset),
                        duration: .microseconds(Int64(sample.duration * 1_000)),
                        statusCode: sample.status,
                        error: sample.status == nil
                            ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001) : nil
                    )
                )
                if sample.status == 200 && index % 11 == 0 {
                    var request = URLRequest(url: url)
                    request.httpMethod = sample.method
                    agent.recordParseFailure(
                        for: request,
                        response: nil,
                        error: DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x")),
                        module: sample.module,
                        data: Data("<html>".utf8)
                    )
                    parseFailures["\(sample.host) \(sample.module) \(sample.path)", default: 0] += 1
                }
            }
            for agent in agents.values {
                agent.recordIntervalPoints(endingAt: Timestamp(nanosecondsSinceEpoch: end * 1_000_000_000))
            }
            for instance in cacheAdvice.sorted() {
                let points = taken.withLock { $0.removeValue(forKey: instance) ?? [] }
                for point in points {
                    typealias Tag = PointSchema.Tag
                    let inPoint = samples.filter {
                        $0.interval == interval && $0.instance == instance && $0.host == point.tag(Tag.host)
                            && $0.method == point.tag(Tag.method) && $0.path == point.tag(Tag.path)
                            && $0.statusClass == point.tag(Tag.statusClass)
                    }
                    precondition(
                        point.field(PointSchema.IntervalField.count) == .int(Int64(inPoint.count)),
                        "\(point) holds \(inPoint.count) samples"
                    )
                    cacheFields.append(
                        Point(
                            measurement: point.measurement,
                            tags: point.tags,
                            fields: Self.cacheFields(of: inPoint),
                            timestamp: point.timestamp
                        )
                    )
                }
            }
        }
        return (parseFailures, cacheFields)
    }

    /// The cumulative histogram of `values` (ms) over `bounds` (ms) as the agent writes it: per bound, the
    /// values at or below it, then every value (`le_inf`).
    static func histogram(_ values: [Double], bounds: [Double]) -> [(bound: Double, count: Double)] {
        bounds.map { bound in (bound, Double(values.filter { $0 <= bound }.count)) }
            + [(.infinity, Double(values.count))]
    }

    /// The quantile `q` of a cumulative histogram, interpolated linearly within the bucket that holds rank
    /// q × count (0 below the first bound; the last finite bound above it), as Flux's `histogramQuantile()` and
    /// PromQL's `histogram_quantile()` both compute it. They differ only where the rank equals a bucket's count
    /// and empty buckets follow it: any value along those empty buckets is the quantile, PromQL (and
    /// VictoriaMetrics) answer the lower end, Flux the upper. Returns the range between the two.
    static func histogramQuantile(_ q: Double, _ buckets: [(bound: Double, count: Double)]) -> ClosedRange<Double> {
        let rank = q * buckets.last!.count
        // Flux: the last bucket whose count is at most the rank, and the next one.
        let flux: Double = {
            guard let index = buckets.lastIndex(where: { rank >= $0.count }) else {
                return buckets[0].bound * rank / buckets[0].count
            }
            if index == buckets.count - 1 { return buckets[index].bound }
            let (lower, upper) = (buckets[index], buckets[index + 1])
            if rank == lower.count || upper.bound.isInfinite { return lower.bound }
            return lower.bound + (upper.bound - lower.bound) * (rank - lower.count) / (upper.count - lower.count)
        }()
        // PromQL: the first bucket whose count is at least the rank.
        let promQL: Double = {
            let index = buckets.dropLast().firstIndex { $0.count >= rank } ?? buckets.count - 1
            if index == buckets.count - 1 { return buckets[buckets.count - 2].bound }
            let start = index > 0 ? buckets[index - 1] : (bound: 0, count: 0)
            return start.bound + (buckets[index].bound - start.bound) * (rank - start.count)
                / (buckets[index].count - start.count)
        }()
        return min(flux, promQL)...max(flux, promQL)
    }

    /// The bucket (lower, upper] of `bounds` (ms) that holds the exact quantile `q` of `values`: the value at rank
    /// ⌈q × n⌉ of the sorted values.
    static func bucketOfExactQuantile(_ q: Double, of values: [Double], bounds: [Double]) -> ClosedRange<Double> {
        let sorted = values.sorted()
        let exact = sorted[max(Int((q * Double(sorted.count)).rounded(.up)), 1) - 1]
        return (bounds.last { $0 < exact } ?? 0)...(bounds.first { $0 >= exact } ?? .infinity)
    }
}
