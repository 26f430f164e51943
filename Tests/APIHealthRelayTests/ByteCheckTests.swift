import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealthRelay
@_spi(Benchmarking) @_spi(Package) @testable import APIHealth

/// The check on a line's bytes decides as the careful path (a `Point` parsed and checked) does, and forwards
/// the point that path would have forwarded: for the lines an install's agent writes, for foreign ones, and
/// for lines made of everything line protocol finds hard.
@Suite struct ByteCheckTests {
    static let app = AppKeys.App(name: "shop-ios", environment: "prod", index: 0)
    static let now = Timestamp(seconds: 1_800_000_000)

    /// What the byte check does with `line`, and what the careful path does: its refusal, or the point it
    /// forwards as the agent's encoder writes it and a parser reads it back.
    enum Decision: Equatable, CustomStringConvertible {
        case refused(Refusal)
        case forwarded(Point)
        case careful

        var description: String {
            switch self {
            case .refused(let reason): "refused \(reason)"
            case .forwarded(let point): "forwarded \(point)"
            case .careful: "careful"
            }
        }
    }

    /// `point` with its tags sorted, as two writings of one point compare.
    static func normalized(_ point: Point) -> Point {
        var point = point
        point.tags.sort { $0.key < $1.key }
        return point
    }

    static func decisions(
        _ line: [UInt8],
        check: LineCheck,
        precision: Precision = .ns,
        writesUnsignedAsSigned: Bool = false
    ) -> (bytes: Decision, careful: Decision)? {
        let parser = LineParser(precision: precision)
        let forwarding = LineCheck.Forwarding(
            app: app,
            precision: .ns,
            writesUnsignedAsSigned: writesUnsignedAsSigned
        )
        var spans = LineSpans()
        var out: [UInt8] = []
        let scanned = line.withUnsafeBufferPointer { try? parser.scanLine($0, into: &spans) }
        let parsed = try? parser.parseLine(line)
        // The scan accepts exactly the lines the parser does.
        #expect((scanned == nil) == (parsed == nil), "\(String(decoding: line, as: UTF8.self))")
        guard scanned == true, var point = parsed.flatMap({ $0 }) else { return nil }
        let outcome = line.withUnsafeBufferPointer {
            check.check($0, spans: spans, precision: precision, forwarding: forwarding, now: now, into: &out)
        }
        let bytes: Decision
        switch outcome {
        case .refused(let reason): bytes = .refused(reason)
        case .careful: bytes = .careful
        case .forward:
            #expect(out.last == UInt8(ascii: "\n"))
            let read = try? LineParser(precision: .ns).parseLine(Array(out.dropLast()))
            bytes = read.flatMap { $0 }.map { .forwarded(normalized($0)) } ?? .careful
        }
        let careful: Decision
        if let reason = check.check(&point, app: app, now: now) {
            careful = .refused(reason)
        } else {
            var encoder = LineEncoder(precision: .ns)
            encoder.writesUnsignedAsSigned = writesUnsignedAsSigned
            var written: [UInt8] = []
            guard (try? encoder.encode(point, into: &written)) != nil,
                let read = try? LineParser(precision: .ns).parseLine(Array(written.dropLast()))
            else { return (bytes, .careful) }
            careful = .forwarded(normalized(read))
        }
        return (bytes, careful)
    }

    static func expectSameDecision(_ text: String, check: LineCheck = LineCheck(), precision: Precision = .ns) {
        for unsignedAsSigned in [false, true] {
            guard
                let (bytes, careful) = decisions(
                    Array(text.utf8),
                    check: check,
                    precision: precision,
                    writesUnsignedAsSigned: unsignedAsSigned
                )
            else { continue }
            #expect(bytes == .careful || bytes == careful, "\(text)\nbytes: \(bytes)\ncareful: \(careful)")
        }
    }

    @Test func decidesAsTheCarefulPathOnTheSchemasLines() {
        let interval =
            "apihealth_request_interval,app_version=4.2.0,country=BR,host=api.shop.example,method=GET,module=shop,path=/cart,service=shop-ios,status_class=2xx"
        let at = " \(Self.now.nanosecondsSinceEpoch - 5_000_000_000)"
        let lines = [
            "\(interval) count=12i,errors=0i,duration_ms_sum=1534.25,duration_ms_min=41.5,le_100=3i,le_2.5=1i,le_inf=12i"
                + at,
            "\(interval) count=3i,duration_ms_sum=12i,duration_ms_max=7u,errors=5u" + at,
            "\(interval),env=staging count=1i" + at,
            "apihealth_request_interval,service=shop-ios,zone=a count=1i" + at,
            "apihealth_request_interval,service=shop-ios count=1i",
            "apihealth_request,host=a,service=shop-ios request_bytes=10i,response_bytes=7u,success=t,error=\"x, y=z\""
                + at,
            "apihealth_request,host=a,service=shop-ios request_bytes=-1i" + at,
            "apihealth_request,host=a,service=shop-ios request_bytes=-0i" + at,
            "apihealth_request,host=a,service=shop-ios status_code=9223372036854775808u" + at,
            "apihealth_request,host=a,service=shop-ios status_code=9223372036854775807u" + at,
            "apihealth_request,host=a,service=shop-ios request_bytes=18446744073709551615u" + at,
            "apihealth_request,host=a,service=shop-ios success=TRUE,reused_connection=False" + at,
            "apihealth_request,host=a,service=shop-ios duration_ms=1e3,ttfb_ms=.5,dns_ms=5.,connect_ms=-0" + at,
            "apihealth_request,host=a,service=shop-ios success=1i" + at,
            "apihealth_request,host=a,service=shop-ios error=1i" + at,
            "apihealth_request,host=a,service=shop-ios duration_ms=\"slow\"" + at,
            "apihealth_agent,instance=i,service=shop-ios points_written=3i,clock_offset_ms=2i,last_error=\"e\"" + at,
            "apihealth_parse_failure,service=shop-ios count=1i,coding_path=\"a[0]\"" + at,
            "apihealth_request_interval,service=shop-ios count=1i,count=2i" + at,
            "apihealth_request_interval,service=shop-ios le_300=1i,le_300=2i" + at,
            "apihealth_request_interval,path=a\\ b,service=shop-ios count=1i" + at,
            "apihealth_request_interval,path=a\\\\b,service=shop-ios count=1i" + at,
            "apihealth_request_interval,service=shop-ios count=1i \(Self.now.nanosecondsSinceEpoch + 86_400_000_000_000)",
            "apihealth_request_interval,service=shop-ios count=1i -9223372036854775808",
            "apihealth_request_interval,service=other count=1i" + at,
            "apihealth_request_interval,service=shop-ios\u{301} count=1i" + at,
            "apihealth_request_interval,country=br,service=shop-ios count=1i" + at,
            "apihealth_request_interval,app_version=4.2\u{20AC},service=shop-ios count=1i" + at,
            "apihealth_request_interval,service=shop-ios bitcoin=1i" + at,
            "apihealth_relay,service=shop-ios requests=1u" + at,
            "cpu,service=shop-ios usage=1" + at,
        ]
        for line in lines { Self.expectSameDecision(line) }
        Self.expectSameDecision("apihealth_request_interval,service=shop-ios count=1i 1800000000", precision: .s)
        Self.expectSameDecision(
            "apihealth_request_interval,service=shop-ios count=1i 1700000000",
            check: LineCheck(restamps: true),
            precision: .s
        )
    }

    /// An app's agent's own lines, the bulk of what a relay sees (interval points with every default bucket,
    /// objectives and cache advice, transport errors, raw request points, the health point), go the byte
    /// path, none left to the careful one, and forward what the careful path would.
    @Test func theAgentsLinesAreForwardedOnTheirBytes() throws {
        var configuration = APIHealthConfiguration.app("shop-ios", version: "4.2.0+77")
        configuration.spool = nil
        configuration.country = "BR"
        configuration.capture.rawPoints = .all
        configuration.capture.cacheAdvice = true
        configuration.objectives = ObjectiveOptions(
            default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300)))
        )
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "bytes"))
        let start = Date(timeIntervalSince1970: Double(Self.now.seconds) - 30)
        for (index, status) in [200, 503, 404, 200, 200, 301].enumerated() {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.shop.example/products/\(index + 1)")!,
                    module: "shop",
                    startedAt: start,
                    duration: .milliseconds(40 * index + 7),
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
        #expect(points.contains { $0.fields.filter { $0.key.hasPrefix("le_") }.count > 8 })
        let check = LineCheck(maximumAge: .seconds(86_400 * 365 * 100))
        for point in points {
            var line: [UInt8] = []
            try LineEncoder(precision: .ns).encode(point, into: &line)
            line.removeLast()
            let (bytes, careful) = try #require(Self.decisions(line, check: check))
            guard case .forwarded = bytes else {
                Issue.record("\(bytes): \(String(decoding: line, as: UTF8.self))")
                continue
            }
            #expect(bytes == careful, "\(String(decoding: line, as: UTF8.self))")
        }
    }

    /// Lines made of everything line protocol finds hard, of the schema's shape and broken byte by byte: the
    /// byte check refuses each for the careful path's reason, or forwards what it would, or leaves it to it.
    @Test func decidesAsTheCarefulPathOnHostileLines() {
        var random = SeededGenerator(state: 58)
        let encoder = LineEncoder(precision: .ns)
        let alphabet = HostileCorpusTests.alphabet + ["BR", "4.2.0", "le_", "1e3", "u", "i", "t"]
        var byteDecided = 0
        for index in 0..<3_000 {
            func text(_ maxLength: Int) -> String {
                var result = "k"
                for _ in 0..<Int.random(in: 0...maxLength, using: &random) {
                    result += alphabet.randomElement(using: &random)!
                }
                return result
            }
            let keys = ["host", "path", "country", "app_version", "env", "service", "x"]
            var tags = (0..<Int.random(in: 0...4, using: &random)).map { _ in
                Point.Tag(keys.randomElement(using: &random)!, text(6))
            }
            tags.append(Point.Tag("service", Int.random(in: 0..<10, using: &random) == 0 ? "other" : Self.app.name))
            let values: [FieldValue] = [
                .int(-1), .int(7), .uint(UInt64.max), .uint(3), .float(0.1), .float(1e300), .float(-0.0), .bool(true),
                .string(text(8)),
            ]
            let fieldKeys = ["count", "duration_ms_sum", "le_300", "le_2.5", "request_bytes", "errors", "bitcoin"]
            let fields = (0..<Int.random(in: 1...4, using: &random)).map { _ in
                Point.Field(fieldKeys.randomElement(using: &random)!, values.randomElement(using: &random)!)
            }
            let point = Point(
                measurement: Int.random(in: 0..<10, using: &random) == 0
                    ? "cpu" : PointSchema.Measurement.requestInterval,
                tags: tags,
                fields: fields,
                timestamp: Timestamp(nanosecondsSinceEpoch: Self.now.nanosecondsSinceEpoch - Int64(index))
            )
            var line: [UInt8] = []
            guard (try? encoder.encode(point, into: &line)) != nil else { continue }
            line.removeLast()
            if Int.random(in: 0..<4, using: &random) == 0 {
                line[Int.random(in: 0..<line.count, using: &random)] = Array(",= \"\\\n".utf8).randomElement(
                    using: &random
                )!
            }
            for unsignedAsSigned in [false, true] {
                guard
                    let (bytes, careful) = Self.decisions(
                        line,
                        check: LineCheck(),
                        writesUnsignedAsSigned: unsignedAsSigned
                    )
                else { continue }
                if bytes != .careful { byteDecided += 1 }
                #expect(
                    bytes == .careful || bytes == careful,
                    "\(String(decoding: line, as: UTF8.self))\nbytes: \(bytes)\ncareful: \(careful)"
                )
            }
        }
        #expect(byteDecided > 2_000, "the byte path decides most lines: \(byteDecided)")
    }
}
