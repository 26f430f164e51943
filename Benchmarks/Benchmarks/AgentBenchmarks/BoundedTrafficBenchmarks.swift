@_spi(Benchmarking) import APIHealth
import Benchmark
import Foundation
import LineProtocol

/// The hosts of a multi-tenant service: numbered subdomains, IPv4 literals and per-region hosts named
/// after their instance's address, `index` picking one of 500,000.
func tenantHost(_ index: Int) -> String {
    switch index % 3 {
    case 0: return "tenant\(index).api.example.com"
    case 1: return "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
    default:
        let regions = ["us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"]
        return
            "ip-10-\(index >> 16 & 255)-\(index >> 8 & 255)-\(index & 255).\(regions[index / 3 % 4]).compute.example.net"
    }
}

let tenantPaths = ["/users/{n}", "/orders/{n}/items", "/health", "/v2/search"]

/// `record` with host learning and the endpoint cap: a known endpoint on a folded host, a host never
/// seen before, and 1,000,000 samples over 500,000 hosts against the same over one host.
func boundedTrafficBenchmarks() {
    // A known endpoint whose host is folded (`tenant4711.api.example.com` is `*.api.example.com`): the
    // cached series, no allocation.
    let folded = RecordRun()
    Benchmark(
        "record sample (memory only, folded host, known endpoint)",
        configuration: .init(
            scalingFactor: .kilo,
            setup: { folded.agent = makeAgent(spool: nil) },
            teardown: { folded.agent = nil }
        )
    ) { benchmark in
        guard let agent = folded.agent else { fatalError("no agent: the setup did not run") }
        var next = sample
        next.url = URL(string: "https://tenant4711.api.example.com/users/8271/orders")!
        var recorded = folded.recorded
        let before = agent.metrics
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            next.startedAt = instant(recorded)
            agent.record(next)
            recorded += 1
        }
        benchmark.stopMeasurement()
        expectRecorded(agent, recorded - folded.recorded, since: before)
        folded.recorded = recorded
    }

    // A host never seen before on every sample (`tenant<N>.api.example.com`): the URL is parsed, the host
    // folded, the path templated and the series rendered (then found among the known ones).
    let fresh = RecordRun()
    Benchmark(
        "record sample (memory only, a never-seen host each time)",
        configuration: .init(
            metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
            scalingFactor: .kilo,
            maxIterations: 150,
            setup: {
                fresh.agent = makeAgent(spool: nil)
                fresh.urls = (0..<200_000).map {
                    URL(string: "https://tenant\($0 + 1_000).api.example.com/users/8271/orders")!
                }
            },
            teardown: {
                fresh.agent = nil
                fresh.urls = []
            }
        )
    ) { benchmark in
        guard let agent = fresh.agent else { fatalError("no agent: the setup did not run") }
        var next = sample
        var recorded = fresh.recorded
        let hosts = fresh.urls
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            next.url = hosts[recorded % hosts.count]
            next.startedAt = instant(recorded)
            agent.record(next)
            recorded += 1
        }
        benchmark.stopMeasurement()
        fresh.recorded = recorded
    }

    // 1,000,000 samples over 500,000 hosts of three shapes and four path shapes, raw points off, an
    // interval every 25,000 samples; the same with one host. Resident memory growth, and the run checks
    // the bounds: at most 64 host tags, interval points at most 1/40 of the requests, nothing dropped,
    // the interval counts adding up to the requests.
    for oneHost in [false, true] {
        let run = RecordRun()
        Benchmark(
            "record 1,000,000 samples over \(oneHost ? "one host" : "500,000 hosts") (raw points none)",
            configuration: .init(
                metrics: [.peakMemoryResidentDelta, .wallClock],
                warmupIterations: 0,
                maxIterations: 1,
                setup: { run.agent = makeAgent(spool: nil) { $0.capture.rawPoints = .none } },
                teardown: { run.agent = nil }
            )
        ) { benchmark in
            guard let agent = run.agent else { fatalError("no agent: the setup did not run") }
            let samples = 1_000_000
            let perInterval = 25_000
            var next = sample
            let seen = IntervalTally()
            agent.observeIntervalPoints { points in seen.add(points) }
            benchmark.startMeasurement()
            for index in 0..<samples {
                let host = oneHost ? "api.example.com" : tenantHost(index % 500_000)
                let path = tenantPaths[index % 4].replacingOccurrences(of: "{n}", with: "\(index % 997)")
                next.url = URL(string: "https://\(host)\(path)")!
                next.startedAt = instant(index)
                agent.record(next)
                if (index + 1) % perInterval == 0 {
                    let end = Timestamp(seconds: 1_700_000_000 + Int64(index / perInterval + 1) * 3_600)
                    _ = agent.recordIntervalPoints(endingAt: end)
                }
            }
            benchmark.stopMeasurement()
            let (hostTags, intervalPoints, counted) = seen.totals
            let metrics = agent.metrics
            precondition(hostTags <= 64, "\(hostTags) host tags")
            precondition(intervalPoints * 40 <= samples, "\(intervalPoints) interval points")
            precondition(counted == Int64(samples), "interval counts \(counted) for \(samples) samples")
            precondition(metrics.pointsDropped == 0, "\(metrics.pointsDropped) dropped")
            // On stderr: the benchmark plugin passes it through.
            FileHandle.standardError.write(
                Data(
                    ("\(oneHost ? "one host" : "500,000 hosts"): \(hostTags) host tags, \(intervalPoints) interval points for \(samples) requests (1/\(samples / max(intervalPoints, 1))), \(metrics.endpoints) endpoints held, \(metrics.requestsOverflowed) requests overflowed\n")
                        .utf8
                )
            )
        }
    }
}

/// The host tags, interval points and requests counted that an agent handed over.
final class IntervalTally: @unchecked Sendable {
    /// Guards the three below.
    private let lock = NSLock()
    private var hostTags = Set<String>()
    private var points = 0
    private var counted: Int64 = 0

    func add(_ taken: [Point]) {
        lock.lock()
        defer { lock.unlock() }
        for point in taken {
            hostTags.insert(point.tag(PointSchema.Tag.host) ?? "")
            if case .int(let count)? = point.fields.first(where: { $0.key == PointSchema.IntervalField.count })?.value {
                counted += count
            }
            points += 1
        }
    }

    var totals: (hostTags: Int, points: Int, counted: Int64) {
        lock.lock()
        defer { lock.unlock() }
        return (hostTags.count, points, counted)
    }
}
