import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct User: Decodable {
    var id: Int
    var name: String
}

@Suite struct SchemaTests {
    static func agent(_ configure: (inout APIHealthConfiguration) -> Void = { _ in }) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "schema-tests")
        configuration.spool = nil
        // A point for every request: the tests read each request's own.
        configuration.capture.rawPoints = .all
        configure(&configuration)
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "schema-tests"))
    }

    static func sample(_ url: String, status: Int? = 200, startedAt: Date = Date()) -> RequestSample {
        RequestSample(
            method: "get",
            url: URL(string: url)!,
            module: "m",
            startedAt: startedAt,
            duration: .milliseconds(12),
            statusCode: status
        )
    }

    @Test func queryFragmentAndUserInfoAreNeverRecorded() throws {
        let agent = try Self.agent()
        agent.record(Self.sample("https://bob:secret@api.example.com/users/42?token=abc#frag"))
        let line = String(
            decoding: agent.pendingPoints().isEmpty ? [] : Array("\(agent.pendingPoints())".utf8),
            as: UTF8.self
        )
        #expect(
            !line.contains("secret") && !line.contains("token=abc") && !line.contains("frag") && !line.contains("bob")
        )
        let point = try #require(agent.pendingPoints().first)
        #expect(
            Set(point.tags)
                == Set(
                    [
                        Point.Tag("host", "api.example.com"), Point.Tag("method", "GET"), Point.Tag("module", "m"),
                        Point.Tag("path", "/users/{id}"), Point.Tag("status", "200"), Point.Tag("status_class", "2xx"),
                    ] + agent.configuration.everyPointTags
                )
        )
    }

    @Test func distinctPathsAreCappedAndTheOverflowCounted() throws {
        let agent = try Self.agent { $0.capture.maximumDistinctPaths = 3 }
        for path in ["a", "b", "c", "d", "e", "a"] { agent.record(Self.sample("https://api.example.com/\(path)")) }
        let paths = agent.pendingPoints().compactMap { $0.tag("path") }
        #expect(paths == ["/a", "/b", "/c", "{overflow}", "{overflow}", "/a"])
        let selfMetrics = AgentHealthPoint.make(
            agent.metrics,
            tags: agent.configuration.everyPointTags,
            configuration: agent.configuration
        )
        #expect(selfMetrics.field("paths_overflowed") != nil)
    }

    @Test func excludedHostsAndTheDestinationAreNotRecorded() throws {
        let agent = try Self.agent {
            $0.capture.excludedHosts = ["internal.example.com"]
            $0.destination = InfluxDestination(
                url: URL(string: "http://influx.example.com:8086")!,
                api: .v2(organization: "o", bucket: "b")
            )
        }
        agent.record(Self.sample("https://internal.example.com/x"))
        agent.record(Self.sample("http://influx.example.com:8086/api/v2/write"))
        agent.record(Self.sample("https://api.example.com/x"))
        agent.record(Self.sample("http://influx.example.com:9000/other-service"))
        #expect(agent.pendingPoints().map { $0.tag("host") } == ["api.example.com", "influx.example.com:9000"])
    }

    @Test func excludedHostsMatchWhateverTheCaseAndByPortWhenGivenOne() throws {
        let agent = try Self.agent { $0.capture.excludedHosts = ["Internal.Example.com", "other.example.com:8443"] }
        agent.record(Self.sample("https://INTERNAL.example.com/x"))
        agent.record(Self.sample("https://internal.example.com:9000/x"))
        agent.record(Self.sample("https://Other.Example.com:8443/x"))
        agent.record(Self.sample("https://other.example.com:9443/x"))
        agent.record(Self.sample("https://other.example.com/x"))
        #expect(agent.pendingPoints().map { $0.tag("host") } == ["other.example.com:9443", "other.example.com"])
    }

    /// A request's own thread decides whether to hook it (its host read in place, with no lock and no
    /// cache) as the record loop decides whether to record it (from the URL's parts), for plain URLs
    /// and for those left to Foundation's reading (a user, an IPv6 literal, an escape, a port that is
    /// not a number).
    @Test func hookingAndRecordingAgreeOnWhatIsLeftOut() throws {
        let agent = try Self.agent {
            $0.capture.excludedHosts = [
                "Internal.Example.com", "other.example.com:8443", "[::1]:9000", "x.example.com:abc",
            ]
        }
        let urls = [
            "https://internal.example.com/x", "HTTPS://INTERNAL.EXAMPLE.COM:1/x?q=1", "https://internal.example.co/x",
            "https://internal.example.comm/x", "https://other.example.com:8443", "https://other.example.com:8444/x",
            "https://other.example.com/x", "https://user@internal.example.com/x",
            "https://user@other.example.com:8443/",
            "http://[::1]:9000/x", "http://[::1]:9001/x", "https://internal.example.com/a%20b",
            "https://x.example.com/x",
            "https://api.example.com/x", "http://localhost:8086/api/v2/write", "http://localhost:8087/api/v2/write",
        ]
        var leftOut: [String] = []
        for url in urls {
            let recordedBefore = agent.pendingPoints().count
            agent.record(Self.sample(url))
            let recorded = agent.pendingPoints().count > recordedBefore
            #expect(agent.isExcluded(URL(string: url)!) == !recorded, "\(url)")
            if !recorded { leftOut.append(url) }
        }
        #expect(
            leftOut == [
                "https://internal.example.com/x", "HTTPS://INTERNAL.EXAMPLE.COM:1/x?q=1",
                "https://other.example.com:8443",
                "https://user@internal.example.com/x", "https://user@other.example.com:8443/", "http://[::1]:9000/x",
                "https://internal.example.com/a%20b",
            ]
        )
    }

    /// A request whose start no instant can hold (a clock gone wrong, a decoded date of 1e300 seconds)
    /// is refused and counted as invalid, never a crash; the interval aggregate still counts it.
    @Test func aStartNoInstantCanHoldIsRefusedAndCounted() throws {
        let agent = try Self.agent()
        for seconds in [1e300, -1e300, .infinity, .nan, 0x1p63, -0x1p63] {
            agent.record(Self.sample("https://api.example.com/x", startedAt: Date(timeIntervalSince1970: seconds)))
        }
        agent.record(Self.sample("https://api.example.com/x", startedAt: Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(agent.metrics.pointsInvalid == 6)
        #expect(agent.pendingPoints().count == 1)
    }

    /// Whole seconds round toward negative infinity and the rest to the nearest nanosecond, before
    /// the epoch as after it.
    @Test func aStartIsTheNearestNanosecondOfItsDate() {
        #expect(
            Timestamp(date: Date(timeIntervalSince1970: 1_700_000_000.25))
                == Timestamp(seconds: 1_700_000_000, nanoseconds: 250_000_000)
        )
        #expect(Timestamp(date: Date(timeIntervalSince1970: -1.25)) == Timestamp(seconds: -2, nanoseconds: 750_000_000))
        #expect(Timestamp(date: Date(timeIntervalSince1970: -3)) == Timestamp(seconds: -3))
        #expect(Timestamp(date: Date(timeIntervalSince1970: 0)) == Timestamp(seconds: 0))
        let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
        let microseconds = Timestamp(date: date).value(in: .us)
        #expect(microseconds == 1_700_000_000_123_456)
    }

    @Test func twoPointsOfOneSeriesNeverShareATimestamp() throws {
        let agent = try Self.agent { $0.precision = .ms }
        let instant = Date(timeIntervalSince1970: 1_700_000_000.123)
        for _ in 0..<5 { agent.record(Self.sample("https://api.example.com/x", startedAt: instant)) }
        agent.record(Self.sample("https://api.example.com/y", startedAt: instant))
        let points = agent.pendingPoints()
        let base = Timestamp(date: instant).value(in: .ms)!
        #expect(points.prefix(5).map { $0.timestamp!.value(in: .ms)! } == (0..<5).map { base + Int64($0) })
        #expect(points.last?.timestamp?.value(in: .ms) == base, "another series keeps its own instant")

        // A burst at one instant takes consecutive units up to the bound (1,000 ms), in constant time per
        // point; the rest are dropped and counted, never written over another point.
        let burst = try Self.agent { $0.precision = .ms }
        for _ in 0..<20_000 { burst.record(Self.sample("https://api.example.com/z", startedAt: instant)) }
        let milliseconds = burst.pendingPoints().compactMap { $0.timestamp?.value(in: .ms) }
        #expect(Set(milliseconds).count == 1_001)
        #expect(milliseconds.max() == base + 1_000)
        #expect(burst.metrics.pointsDropped == 20_000 - 1_001)
    }

    /// Three points per unit on one series, for 3,000 units of simulated time: nudged timestamps never
    /// get more than the bound (1,000 units, at most one second) ahead of the clock, no two share an
    /// instant, and every point left out is counted.
    @Test(arguments: Precision.allCases)
    func steadyOverloadStaysWithinTheNudgeBound(precision: Precision) throws {
        let clock = ManualClock()
        var configuration = APIHealthConfiguration(serviceName: "schema-tests")
        configuration.spool = nil
        configuration.precision = precision
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "schema-tests"),
            clock: clock
        )
        let unit = precision.nanosecondsPerUnit
        let bound: Int64 = [Precision.ns: 1_000, .us: 1_000, .ms: 1_000, .s: 1][precision]!
        let start: Int64 = 1_700_000_000_000_000_000
        var recorded = 0
        var furthestAhead: Int64 = 0
        for step in 0..<3_000 {
            clock.advance(by: .nanoseconds(unit))
            let now = start + Int64(step) * unit
            for _ in 0..<3 {
                let point = Point(
                    measurement: "load",
                    tags: ["series": "one"],
                    fields: ["v": 1],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now)
                )
                agent.write(point)
                recorded += 1
            }
            if step % 500 == 499 {
                let latest = agent.pendingPoints().compactMap { $0.timestamp?.value(in: precision) }.max() ?? 0
                furthestAhead = max(furthestAhead, latest - now / unit)
            }
        }
        let instants = agent.pendingPoints().compactMap { $0.timestamp?.value(in: precision) }
        #expect(Set(instants).count == instants.count, "no two points of the series share an instant")
        #expect(furthestAhead <= bound, "at most \(bound) units ahead of the clock, \(furthestAhead) seen")
        #expect(instants.max()! <= (start / unit) + 2_999 + bound)
        #expect(instants.count >= 3_000, "every unit of the clock keeps a point")
        #expect(
            UInt64(instants.count) + agent.metrics.pointsDropped == UInt64(recorded),
            "each point left out is counted"
        )
    }

    @Test func disabledAgentRecordsNothingAndLeavesSessionsAlone() async throws {
        let configuration = try APIHealthConfiguration.fromEnvironment(["APIHEALTH_ENABLED": "0"], serviceName: "off")
        #expect(!configuration.isEnabled)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "off"))
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "m")
        #expect(!(sessionConfiguration.protocolClasses ?? []).contains { $0 is InterceptingURLProtocol.Type })
        agent.record(Self.sample("https://api.example.com/x"))
        #expect(agent.write(Point(measurement: "m", fields: ["v": 1])) == false)
        #expect(agent.pendingPoints().isEmpty)
    }

    @Test func parseFailuresAreRecordedByKindWithoutCountingTheRequestTwice() async throws {
        let harness = try await CaptureHarness(module: "accounts")
        for (path, kind, codingPath) in [
            ("/json/missing", "keyNotFound", "name"), ("/json/mismatch", "typeMismatch", "id"),
            ("/json/null", "valueNotFound", "id"), ("/json/html", "notJSON", ""), ("/json/cut", "dataCorrupted", ""),
        ] {
            let request = URLRequest(url: harness.url(path))
            let (data, response) = try await harness.instrumented.data(for: request)
            #expect(throws: DecodingError.self) {
                try harness.agent.decode(User.self, from: data, for: request, response: response, module: "accounts")
            }
            let failure = try #require(
                harness.agent.pendingPoints().last { $0.measurement == PointSchema.Measurement.parseFailure }
            )
            #expect(failure.tag("failure") == kind)
            #expect(failure.tag("path") == path)
            #expect(failure.tag("module") == "accounts")
            #expect(failure.field("coding_path") == .string(codingPath))
            #expect(failure.field("count") == .int(1))
        }
        let request = URLRequest(url: harness.url("/json/user"))
        let (data, response) = try await harness.instrumented.data(for: request)
        let user = try harness.agent.decode(User.self, from: data, for: request, response: response, module: "accounts")
        #expect(user.name == "Ada")
        let requests = try await harness.waitForRequests(6)
        #expect(requests.count == 6, "each request counted once, parse failure or not")
        #expect(
            harness.agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.parseFailure }.count == 5
        )
        await harness.close()
    }

    /// A JSON document cut off in the middle is JSON whose data is corrupted; a body that is not JSON,
    /// nor the start of a JSON document, is `notJSON`.
    @Test func aCutOffJSONDocumentIsDataCorrupted() {
        func kind(_ body: String) -> ParseFailureKind? {
            let decoded = Result { try JSONDecoder().decode(User.self, from: Data(body.utf8)) }
            guard case .failure(let error) = decoded else { return nil }
            return ParseFailureKind.classify(error, data: Data(body.utf8)).kind
        }
        for cut in [
            #"{"id":7,"name":"Ad"#, #"{"id":7,"#, #"{"#, #"  {"id":7,"name":"Ada""#, #"{"id":7,"name":"A\u00"#,
            #"{"id":-"#,
        ] {
            #expect(kind(cut) == .dataCorrupted, "\(cut)")
        }
        for body in ["<html>not json</html>", "", "  ", "Internal Server Error", "nul!"] {
            #expect(kind(body) == .notJSON, "\(body)")
        }
    }

    @Test func correlationIDsComeFromRequestOrResponseHeadersAsFields() async throws {
        let harness = try await CaptureHarness { $0.capture.correlationHeaders = ["X-Request-Id", "traceparent"] }
        var withHeader = URLRequest(url: harness.url("/status/200"))
        withHeader.setValue(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            forHTTPHeaderField: "traceparent"
        )
        _ = try await harness.instrumented.data(for: withHeader)
        _ = try await harness.instrumented.data(for: URLRequest(url: harness.url("/ok")))
        let points = try await harness.waitForRequests(2)
        #expect(
            points[0].field("correlation_id") == .string("4bf92f3577b34da6a3ce929d0e0e4736"),
            "a traceparent's trace id"
        )
        #expect(points[1].field("correlation_id") == .string("resp-123"), "from the response when the request had none")
        #expect(points.allSatisfy { $0.tag("correlation_id") == nil })
        await harness.close()
    }

    /// Every request field, each duration written from whole nanoseconds, and durations past what
    /// whole nanoseconds in 64 bits hold (292 years) written as their float.
    @Test func everyRequestFieldIsWrittenWithItsValue() throws {
        let agent = try Self.agent()
        var sample = RequestSample(
            method: "POST",
            url: URL(string: "https://api.example.com/orders")!,
            module: "m",
            startedAt: Date(),
            duration: .seconds(10) + .nanoseconds(1_500),
            statusCode: 503,
            error: RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001),
            requestBytes: .max,
            responseBytes: 7,
            timeToFirstByte: .seconds(Int64.max / 4),
            redirectCount: 3,
            correlationID: "c-1"
        )
        sample.domainLookup = .nanoseconds(1_234_567)
        sample.connect = .nanoseconds(-5)
        sample.secureConnection = .zero
        sample.networkProtocol = "h2"
        sample.reusedConnection = false
        agent.record(sample)
        let point = try #require(agent.pendingPoints().first)
        let fields = Dictionary(uniqueKeysWithValues: point.fields.map { ($0.key, $0.value) })
        typealias F = PointSchema.Field
        #expect(fields[F.durationMilliseconds] == .float(10_000.0015))
        #expect(fields[F.timeToFirstByteMilliseconds] == .float(Double(Int64.max / 4) * 1_000))
        #expect(fields[F.domainLookupMilliseconds] == .float(1.234567))
        #expect(fields[F.connectMilliseconds] == .float(-0.000005))
        #expect(fields[F.secureConnectionMilliseconds] == .float(0))
        #expect(fields[F.requestBytes] == .uint(.max))
        #expect(fields[F.responseBytes] == .uint(7))
        #expect(fields[F.statusCode] == .int(503))
        #expect(fields[F.success] == .bool(false))
        #expect(fields[F.errors] == .int(1))
        #expect(fields[F.redirects] == .int(3))
        #expect(fields[F.reusedConnection] == .bool(false))
        #expect(fields[F.error] == .string("NSURLErrorDomain -1001"))
        #expect(fields[F.correlationID] == .string("c-1"))
        #expect(fields[F.networkProtocol] == .string("h2"))
        #expect(fields.count == PointSchema.requestFields.count)
    }
}
