import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealthRelay
@_spi(Benchmarking) @_spi(Package) @testable import APIHealth

/// The schema check as a plain value: everything the agent writes passes, and each kind of foreign line
/// is refused for its own reason.
@Suite struct LineCheckTests {
    static let app = AppKeys.App(name: "shop-ios", environment: "prod", index: 0)
    static let now = Timestamp(seconds: 1_800_000_000)

    static func point(_ line: String) -> Point {
        try! LineParser(precision: .ns).parseLine(Array(line.utf8))!
    }

    static func checked(_ line: String, check: LineCheck = LineCheck()) -> (Refusal?, Point) {
        var point = point(line)
        let refusal = check.check(&point, app: app, now: now)
        return (refusal, point)
    }

    /// An app's agent with every kind of point it writes: raw request points, interval points with
    /// objectives and cache advice, transport errors, and its health point.
    @Test func everyPointAnAppsAgentWritesPasses() throws {
        var configuration = APIHealthConfiguration.app("shop-ios", version: "4.2.0+77")
        configuration.spool = nil
        configuration.country = "BR"
        configuration.capture.rawPoints = .all
        configuration.capture.cacheAdvice = true
        configuration.objectives = ObjectiveOptions(
            default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300)))
        )
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "check"))
        let start = Date(timeIntervalSince1970: Double(Self.now.seconds) - 30)
        for (index, status) in [200, 503, 404, 200].enumerated() {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.shop.example/products/\(index + 1)")!,
                    module: "shop",
                    startedAt: start,
                    duration: .milliseconds(120),
                    statusCode: status
                )
            )
        }
        agent.record(
            RequestSample(
                method: "POST",
                url: URL(string: "https://api.shop.example/cart")!,
                module: "shop",
                startedAt: start,
                duration: .milliseconds(900),
                error: RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001)
            )
        )
        #expect(agent.recordIntervalPoints(endingAt: Self.now))
        #expect(agent.recordHealthPoint())
        let points = agent.pendingPoints()
        let measurements = Set(points.map(\.measurement))
        #expect(
            measurements == [
                PointSchema.Measurement.request, PointSchema.Measurement.requestInterval, PointSchema.Measurement.agent,
            ]
        )
        let check = LineCheck(maximumAge: .seconds(86_400 * 365 * 100))
        for var point in points {
            let refusal = check.check(&point, app: Self.app, now: Self.now)
            #expect(refusal == nil, "\(point)")
        }
    }

    @Test func refusesWhatTheAgentNeverWrites() {
        let interval =
            "apihealth_request_interval,host=api.shop.example,method=GET,module=shop,path=/cart,service=shop-ios,status_class=2xx"
        let at = " \(Self.now.nanosecondsSinceEpoch)"
        let cases: [(String, Refusal)] = [
            ("cpu,service=shop-ios usage=1" + at, .measurement),
            ("\(interval),user_id=42 count=1i" + at, .tag),
            ("\(interval),country=Brazil count=1i" + at, .place),
            ("\(interval),country=br count=1i" + at, .place),
            ("\(interval),app_version=4.2\\ beta count=1i" + at, .version),
            ("\(interval) count=1i,bitcoin=1" + at, .field),
            ("\(interval) count=\"many\"" + at, .fieldType),
            ("\(interval) count=1.5" + at, .fieldType),
            ("\(interval) le_inf=t" + at, .fieldType),
            ("\(interval) le_x=1i" + at, .field),
            ("apihealth_request_interval,path=/cart,service=other-app count=1i" + at, .service),
            ("apihealth_request_interval,path=/cart count=1i" + at, .service),
            ("\(interval),host2=\(String(repeating: "a", count: 10)) count=1i" + at, .tag),
            (
                "apihealth_request_interval,path=/\(String(repeating: "a", count: 300)),service=shop-ios count=1i" + at,
                .tagValue
            ),
            ("\(interval) count=1i \(Self.now.nanosecondsSinceEpoch + 365 * 86_400 * 1_000_000_000)", .timestamp),
            ("\(interval) count=1i \(Self.now.nanosecondsSinceEpoch - 2 * 86_400 * 1_000_000_000)", .timestamp),
            ("apihealth_request,service=shop-ios success=1i" + at, .fieldType),
            ("apihealth_agent,service=shop-ios points_written=-1i" + at, .fieldType),
        ]
        for (line, reason) in cases {
            #expect(Self.checked(line).0 == reason, "\(line)")
        }
        let tooMany = (0..<17).map { ",t\($0)=v" }.joined()
        let check = LineCheck(extraTags: Set((0..<17).map { "t\($0)" }))
        #expect(Self.checked("\(interval)\(tooMany) count=1i" + at, check: check).0 == .tagValue)
    }

    @Test func makesAPointReadyToForward() {
        let interval = "apihealth_request_interval,env=staging,host=a,service=shop-ios"
        // The key's environment replaces the install's `env`; integers for floats become floats;
        // an integer for an unsigned field becomes unsigned; a line without a timestamp gets the relay's.
        let (refusal, point) = Self.checked("\(interval) count=3i,duration_ms_sum=12i,le_300=2i,le_2.5=1i")
        #expect(refusal == nil)
        #expect(point.tag("env") == "prod")
        #expect(point.tags.map(\.key) == ["env", "host", "service"])
        #expect(point.field("duration_ms_sum") == .float(12))
        #expect(point.timestamp == Self.now)
        let (_, request) = Self.checked("apihealth_request,service=shop-ios request_bytes=10i,success=t")
        #expect(request.field("request_bytes") == .uint(10))
        let noEnvironment = AppKeys.App(name: "shop-ios", environment: "", index: 0)
        var plain = Self.point("apihealth_request_interval,env=x,service=shop-ios count=1i")
        let plainRefusal = LineCheck().check(&plain, app: noEnvironment, now: Self.now)
        #expect(plainRefusal == nil)
        #expect(plain.tag("env") == nil)
    }

    @Test func restampsInsteadOfRefusingWhenAsked() {
        let ahead = Self.now.nanosecondsSinceEpoch + 365 * 86_400 * 1_000_000_000
        let (refusal, point) = Self.checked(
            "apihealth_request_interval,service=shop-ios count=1i \(ahead)",
            check: LineCheck(restamps: true)
        )
        #expect(refusal == nil)
        #expect(point.timestamp == Self.now)
    }

    @Test func theNameTableFindsEveryNameItHoldsAndNoOther() {
        let names = PointSchema.agentFields + PointSchema.intervalFields + PointSchema.requestFields
        let table = NameTable(Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first }))
        for name in names { #expect(table[name] == names.firstIndex(of: name), "\(name)") }
        for name in ["", "count ", "Count", "le_", "points_recorded_", "duration_ms_sum\u{0}"] {
            #expect(table[name] == nil, "\(name)")
        }
    }

    @Test func bucketAndVersionForms() {
        for key in ["le_1", "le_300", "le_2.5", "le_10000"] { #expect(LineCheck.isBucket(key), "\(key)") }
        for key in ["le_", "le_-1", "le_1e3", "le_.5", "le_1.2.3", "lex300"] {
            #expect(!LineCheck.isBucket(key), "\(key)")
        }
        for version in ["4.2.0", "1.0.0-beta.2", "2024.11+77", "7"] {
            #expect(LineCheck.isVersion(version), "\(version)")
        }
        for version in ["", " 1", "-1", "1/2", String(repeating: "1", count: 33)] {
            #expect(!LineCheck.isVersion(version), "\(version)")
        }
    }
}
