@_spi(Package) import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Foundation
import LineProtocol
import Logging
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Runs COUNT sequential small GETs against a loopback server, through one client, for instruction
// counts under callgrind (scripts/callgrind-capture):
//   capture-probe urlsession|urlsession-instrumented|ahc|ahc-instrumented COUNT
// It checks that an instrumented run recorded exactly one sample per request (exit 2 otherwise).
//   capture-probe record|record-filter|record-rules|record-objectives COUNT
// records COUNT samples (each one millisecond after the last) into a memory-only agent, and checks
// that every one became a line: plain, through a capture filter that re-tags each sample, under
// three success rules, or with availability and latency objectives (the `record` benchmark's variants).
//   capture-probe pipeline COUNT
// records COUNT samples (one microsecond apart) into an agent that ships them to the VictoriaMetrics
// at APIHEALTH_PROBE_VICTORIA_URL, and checks that every one was written.
//   capture-probe service|service-none|service-errors-and-slow|service-all|service-default COUNT
// sends COUNT requests to a service in this process that calls an upstream API for each, without the
// agent or with it on as a service runs it (ServiceProbe.swift).
//   capture-probe redirect-gap COUNT
// follows COUNT 3-hop redirect chains, one at a time, through an instrumented session whose delegate
// is asked at every hop, and compares each recorded duration with the caller's stopwatch (from before
// it makes the task to its completion handler): prints the distribution of the difference and the share
// within 1 ms + 2 % of the stopwatch (exit 2 if a recorded duration is longer than its stopwatch).
let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]) else {
    FileHandle.standardError.write(
        Data("usage: capture-probe urlsession|urlsession-instrumented|ahc|ahc-instrumented COUNT\n".utf8)
    )
    exit(64)
}
let mode = arguments[1]
if ServiceProbe.modes.contains(mode) { ServiceProbe.run(mode: mode, count: count) }
let recording = ["record", "record-filter", "record-rules", "record-objectives"].contains(mode)
let instrumented = mode.hasSuffix("-instrumented") || recording || mode == "ahc-observation"

var configuration = APIHealthConfiguration(serviceName: "capture-probe")
configuration.spool = nil
// Every sample a line of its own, as the figures in Benchmarks/README.md were measured.
configuration.capture.rawPoints = .all
configuration.batching.maximumPendingBytes = 1 << 30
if recording || mode == "ahc-observation" {
    // Counted per sample whatever the machine's speed: no period ends while the samples are recorded (an
    // interval's points, a health point or a batch sealed at 10 s or 5 s of real time would land in the
    // long run and not the short one as often as valgrind's pace on this machine decides).
    let hour = Duration.seconds(3_600)
    configuration.aggregation?.interval = hour
    configuration.selfMetricsInterval = hour
    configuration.batching.flushDelay = hour
    configuration.batching.maximumAge = hour
}
// With APIHEALTH_CACHE_ADVICE=1 the agent gives cache advice (every body digested as it streams); with
// APIHEALTH_PROBE_BODY_BYTES=N the loopback API answers N bytes (the same N every time) instead of its small JSON.
let environment = ProcessInfo.processInfo.environment
configuration.capture.cacheAdvice = environment["APIHEALTH_CACHE_ADVICE"] == "1"
let probeBody: [UInt8] =
    environment["APIHEALTH_PROBE_BODY_BYTES"].flatMap { Int($0) }.map { count in
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    } ?? Array(#"{"id":1,"name":"Ada"}"#.utf8)
if mode == "record-filter" {
    configuration.capture.filter = { sample, request in
        if request.value(forHTTPHeaderField: "X-Synthetic") != nil { return nil }
        var kept = sample
        kept.module = "checkout-eu"
        return kept
    }
} else if mode == "record-rules" {
    configuration.capture.successRules = [
        .success(404, host: "auth.example.com", path: "/oauth/probe"),
        .failure(200...299, host: "*.legacy.example.com"),
        .success(200, 404, host: "api.example.com", path: "/users/{id}/orders"),
    ]
} else if mode == "record-objectives" {
    configuration.objectives = ObjectiveOptions(
        default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300))),
        overrides: [.init(host: "api.example.com", path: "/users/*/orders", objective: .init(availability: 0.9995))]
    )
}
func makeAgent(_ configuration: APIHealthConfiguration) -> APIHealthAgent {
    do {
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "capture-probe"))
    } catch {
        FileHandle.standardError.write(Data("capture-probe: \(error)\n".utf8))
        exit(3)
    }
}
let agent = makeAgent(configuration)

/// The sample the `record` and `pipeline` modes record, one millisecond or microsecond apart.
let probeSample = RequestSample(
    method: "GET",
    url: URL(string: "https://api.example.com/users/8271/orders")!,
    module: "checkout",
    startedAt: Date(timeIntervalSince1970: 1_700_000_000),
    duration: .microseconds(12_345),
    statusCode: 200,
    requestBytes: 312,
    responseBytes: 5_120,
    timeToFirstByte: .microseconds(8_250),
    correlationID: "7f9c2ba4-e88f-4c1b-9d21-3b6f0c9a1e55"
)

let finished = DispatchSemaphore(value: 0)
if mode == "redirect-gap" {
    measureRedirectGap(count, configuration: configuration)
    exit(0)
}
if mode == "pipeline" {
    // COUNT samples recorded, gzipped and written to the VictoriaMetrics at APIHEALTH_PROBE_VICTORIA_URL.
    guard let victoria = ProcessInfo.processInfo.environment["APIHEALTH_PROBE_VICTORIA_URL"].flatMap(URL.init(string:))
    else {
        FileHandle.standardError.write(Data("capture-probe: pipeline needs APIHEALTH_PROBE_VICTORIA_URL\n".utf8))
        exit(64)
    }
    var shipping = configuration
    shipping.destination = InfluxDestination(url: victoria, api: .v2(organization: "o", bucket: "b"))
    shipping.batching.flushDelay = .milliseconds(100)
    let shipper = makeAgent(shipping)
    shipper.start()
    var next = probeSample
    for index in 0..<count {
        next.startedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(index) / 1_000_000)
        shipper.record(next)
    }
    Task.detached {
        await shipper.shutdown(deadline: .seconds(60))
        finished.signal()
    }
    finished.wait()
    let written = shipper.metrics.pointsWritten
    guard written >= UInt64(count), shipper.metrics.pendingLines == 0 else {
        FileHandle.standardError.write(Data("capture-probe: \(written) of \(count) points written\n".utf8))
        exit(2)
    }
    print("capture-probe: pipeline \(count) points written")
    exit(0)
}
if mode == "ahc-observation" {
    // What AsyncHTTPClient capture does per request besides AsyncHTTPClient's own work: the observation
    // made, told of the head, a chunk and the end, then recorded; no request is sent.
    let url = "http://127.0.0.1:8080/users/1"
    let responseHeaders: HTTPHeaders = ["content-type": "application/json", "content-length": "21"]
    let chunk = ByteBuffer(bytes: probeBody)
    for _ in 0..<count {
        let observation = RequestObservation(
            agent: agent,
            module: "probe",
            method: "GET",
            url: url,
            requestHeaders: [:],
            requestBytes: 0
        )
        observation.receivedHead(status: 200, headers: responseHeaders, redirects: 0)
        observation.received(chunk)
        observation.finish()
    }
    finished.signal()
} else if recording {
    var next = probeSample
    for index in 0..<count {
        next.startedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(index) / 1_000)
        agent.record(next)
    }
    finished.signal()
} else {
    Task.detached {
        do {
            let server = try await LoopbackHTTPServer.start(threads: 1) { _ in
                LoopbackHTTPServer.Response(
                    status: 200,
                    headers: [("Content-Type", "application/json")],
                    body: .bytes(probeBody)
                )
            }
            let url = server.baseURL + "/users/1"
            if mode.hasPrefix("urlsession") {
                let sessionConfiguration = URLSessionConfiguration.ephemeral
                if instrumented { agent.instrument(sessionConfiguration, module: "probe") }
                let session = URLSession(configuration: sessionConfiguration)
                let request = URLRequest(url: URL(string: url)!)
                for _ in 0..<count { _ = try await session.data(for: request) }
            } else {
                let client = HTTPClient(eventLoopGroupProvider: .singleton)
                let request = HTTPClientRequest(url: url)
                for _ in 0..<count {
                    var response =
                        instrumented
                        ? try await client.execute(request, timeout: .seconds(10), recordingTo: agent, module: "probe")
                        : try await client.execute(request, timeout: .seconds(10))
                    if mode == "ahc-stream" { response.body = .stream(PassThroughBody(base: response.body)) }
                    _ = try await response.body.collect(upTo: 1 << 24)
                }
                try await client.shutdown()
            }
            try await server.shutdown()
        } catch {
            FileHandle.standardError.write(Data("capture-probe: \(error)\n".utf8))
            exit(1)
        }
        finished.signal()
    }
}
finished.wait()
let recorded = agent.metrics.pointsRecorded
let expected = instrumented ? UInt64(count) : 0
guard recorded == expected else {
    FileHandle.standardError.write(
        Data("capture-probe: recorded \(recorded) samples for \(count) requests (expected \(expected))\n".utf8)
    )
    exit(2)
}
print("capture-probe: \(mode) \(count) requests, \(recorded) samples recorded")

/// A response body passed through unchanged: the `ahc-stream` mode's wrapper, the least any body wrapper costs.
struct PassThroughBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: HTTPClientResponse.Body

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: HTTPClientResponse.Body.AsyncIterator
        mutating func next() async throws -> ByteBuffer? { try await base.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator()) }
}

/// Follows every redirect, asked at each hop, as an app's delegate does.
final class FollowingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(request)
    }
}

/// The `redirect-gap` mode (see the top of this file).
func measureRedirectGap(_ count: Int, configuration: APIHealthConfiguration) {
    let finished = DispatchSemaphore(value: 0)
    let spool = FileManager.default.temporaryDirectory.appendingPathComponent("capture-probe-\(UUID().uuidString)")
    var spooled = configuration
    spooled.spool = SpoolOptions(directory: spool)
    spooled.precision = .ns
    let agent: APIHealthAgent
    do {
        agent = try APIHealthAgent(configuration: spooled, logger: Logger(label: "capture-probe"))
    } catch {
        FileHandle.standardError.write(Data("capture-probe: \(error)\n".utf8))
        exit(3)
    }
    agent.start()
    let stopwatches = Locked([Duration]())
    Task.detached {
        do {
            let server = try await LoopbackHTTPServer.start(threads: 1) { request in
                let remaining = Int(request.path.split(separator: "/").last ?? "") ?? 0
                if remaining == 0 { return .text(200, "arrived") }
                return .text(302, "", headers: [("Location", "/redirect/\(remaining - 1)")])
            }
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            agent.instrument(sessionConfiguration, module: "probe")
            let session = URLSession(
                configuration: sessionConfiguration,
                delegate: FollowingDelegate(),
                delegateQueue: nil
            )
            let url = URL(string: server.baseURL + "/redirect/3")!
            for _ in 0..<count {
                let elapsed: Duration = await withCheckedContinuation { continuation in
                    let started = ContinuousClock.now
                    session.dataTask(with: url) { _, _, _ in
                        continuation.resume(returning: ContinuousClock.now - started)
                    }.resume()
                }
                stopwatches.withLock { $0.append(elapsed) }
            }
            await agent.shutdown(deadline: .seconds(60))
            try await server.shutdown()
        } catch {
            FileHandle.standardError.write(Data("capture-probe: \(error)\n".utf8))
            exit(1)
        }
        finished.signal()
    }
    finished.wait()
    var recorded: [(Timestamp, Double)] = []
    do {
        let reader = try SpoolReader(directory: spool)
        let parser = LineParser(precision: .ns)
        for name in try reader.segmentNames() {
            guard let segment = try reader.segment(named: name) else { continue }
            for line in segment.lines {
                for point in try parser.parse(line) where point.measurement == PointSchema.Measurement.request {
                    if case .float(let milliseconds) = point.field(PointSchema.Field.durationMilliseconds),
                        let timestamp = point.timestamp
                    {
                        recorded.append((timestamp, milliseconds))
                    }
                }
            }
        }
    } catch {
        FileHandle.standardError.write(Data("capture-probe: reading the spool: \(error)\n".utf8))
        exit(1)
    }
    try? FileManager.default.removeItem(at: spool)
    let caller = stopwatches.withLock { $0 }.map { $0 / .milliseconds(1) }
    // Points are stamped at their request's start: in time order, they are in the order made.
    let durations = recorded.sorted { $0.0 < $1.0 }.map(\.1)
    guard durations.count == caller.count else {
        FileHandle.standardError.write(
            Data("capture-probe: \(durations.count) samples for \(caller.count) requests\n".utf8)
        )
        exit(2)
    }
    let gaps = zip(caller, durations).map { $0 - $1 }.sorted()
    let within = zip(caller, durations).filter { $0 - $1 <= 1 + 0.02 * $0 }.count
    let longer = gaps.filter { $0 < 0 }.count
    func quantile(_ q: Double) -> Double { gaps[min(gaps.count - 1, Int(Double(gaps.count) * q))] }
    let medianStopwatch = caller.sorted()[caller.count / 2]
    print(
        String(
            format: "capture-probe: redirect-gap %d chains, stopwatch median %.3f ms; stopwatch - recorded: "
                + "first chain (a new session) %.3f ms of %.3f, then median %.3f ms, p90 %.3f, p99 %.3f, max %.3f, "
                + "min %.3f; within 1 ms + 2 %%: %d of %d; longer than the stopwatch: %d",
            caller.count,
            medianStopwatch,
            caller[0] - durations[0],
            caller[0],
            quantile(0.5),
            quantile(0.9),
            quantile(0.99),
            gaps.last ?? 0,
            gaps.first ?? 0,
            within,
            caller.count,
            longer
        )
    )
    if longer > 0 { exit(2) }
}
