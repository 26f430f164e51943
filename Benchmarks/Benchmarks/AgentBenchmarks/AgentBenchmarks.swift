@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Benchmark
import BenchmarkTolerances
import Foundation
import LineProtocol
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func temporaryDirectory(_ name: String) -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "apihealth-bench-\(name)-\(UUID().uuidString)"
    )
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func makeAgent(
    spool: URL?,
    destination: URL? = nil,
    pendingCap: Int = 64 << 20,
    configure: (inout APIHealthConfiguration) -> Void = { _ in }
) -> APIHealthAgent {
    var configuration = APIHealthConfiguration(
        serviceName: "bench",
        destination: destination.map { InfluxDestination(url: $0, api: .v2(organization: "o", bucket: "b")) }
    )
    configuration.spool = spool.map { SpoolOptions(directory: $0) }
    configuration.batching.maximumPendingBytes = pendingCap
    configuration.batching.flushDelay = .milliseconds(100)
    configuration.retry.initialDelay = .milliseconds(100)
    // Only the agent's last health point, at shutdown, among the benchmarks' points; requests are
    // aggregated as by default, but no interval ends during a run, so a running agent records exactly
    // one point per request.
    configuration.selfMetricsInterval = .seconds(3_600)
    configuration.aggregation?.interval = .seconds(3_600)
    configuration.capture.rawPoints = .all
    configure(&configuration)
    return try! APIHealthAgent(configuration: configuration, logger: Logger(label: "bench"))
}

/// The capture filter and success rules the `record` benchmarks measure.
enum RecordOptions {
    /// A capture filter that re-tags every sample (a copy of it, changed, returned).
    static func filter(_ configuration: inout APIHealthConfiguration) {
        configuration.capture.filter = { sample, request in
            if request.value(forHTTPHeaderField: "X-Synthetic") != nil { return nil }
            var kept = sample
            kept.module = "checkout-eu"
            return kept
        }
    }

    /// Three success rules, the last of which matches the sample's series.
    static func successRules(_ configuration: inout APIHealthConfiguration) {
        configuration.capture.successRules = [
            .success(404, host: "auth.example.com", path: "/oauth/probe"),
            .failure(200...299, host: "*.legacy.example.com"),
            .success(200, 404, host: "api.example.com", path: "/users/{id}/orders"),
        ]
    }
}

let sample = RequestSample(
    method: "GET",
    url: URL(string: "https://api.example.com/users/8271/orders")!,
    module: "checkout",
    startedAt: Date(),
    duration: .microseconds(12_345),
    statusCode: 200,
    requestBytes: 312,
    responseBytes: 5_120,
    timeToFirstByte: .microseconds(8_250),
    correlationID: "7f9c2ba4-e88f-4c1b-9d21-3b6f0c9a1e55"
)

/// The `index`th of a run of samples one microsecond apart: none shares an instant with another, so
/// each becomes a stored line (the same instant again and again would be nudged, then declined).
func instant(_ index: Int) -> Date {
    Date(timeIntervalSince1970: 1_700_000_000 + Double(index) / 1_000_000)
}

/// Blocks the calling thread until `body` finishes (benchmarks are synchronous closures here).
func wait(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        maxDuration: .seconds(3),
        maxIterations: 1_000_000,
        thresholds: tolerances
    )

    // One agent per benchmark, made in its setup and kept between iterations, so what is timed is
    // `record` in a warm agent (not making one). Each sample is one microsecond after the last (as
    // many requests are): none shares an instant, so every one is encoded and stored, none nudged or
    // declined; the run fails otherwise.
    // `record` as configured: without the interval aggregates (what it was before them), with them and
    // every request a point of its own (`all`), and with raw points for errors and slow requests only,
    // or none (each request then only adds to its endpoint's aggregate).
    let variants: [(name: String, spooled: Bool, configure: @Sendable (inout APIHealthConfiguration) -> Void)] = [
        ("record sample (memory only, no interval aggregates)", false, { $0.aggregation = nil }),
        ("record sample (memory only)", false, { _ in }),
        ("record sample (memory only, raw points errors-and-slow)", false, { $0.capture.rawPoints = .errorsAndSlow }),
        ("record sample (memory only, raw points none)", false, { $0.capture.rawPoints = .none }),
        ("record sample (with spool write-through)", true, { _ in }),
        // What the capture filter and the success rules cost `record` (memory only, as the default).
        ("record sample (memory only, with a filter that re-tags it)", false, { RecordOptions.filter(&$0) }),
        ("record sample (memory only, with 3 success rules)", false, { RecordOptions.successRules(&$0) }),
    ]
    for variant in variants {
        let run = RecordRun()
        Benchmark(
            variant.name,
            configuration: .init(
                scalingFactor: .kilo,
                setup: {
                    run.spool = variant.spooled ? temporaryDirectory("record") : nil
                    run.agent = makeAgent(spool: run.spool, configure: variant.configure)
                    if variant.spooled { run.agent?.start() }
                },
                teardown: {
                    if let agent = run.agent { wait { await agent.shutdown(deadline: .seconds(5)) } }
                    if let spool = run.spool { try? FileManager.default.removeItem(at: spool) }
                    run.agent = nil
                }
            )
        ) { benchmark in
            guard let agent = run.agent else { fatalError("no agent: the setup did not run") }
            var next = sample
            var recorded = run.recorded
            let before = agent.metrics
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                next.startedAt = instant(recorded)
                agent.record(next)
                recorded += 1
            }
            // Recorded, not only queued: the record loop's work is part of what is timed.
            agent.waitUntilRecorded()
            benchmark.stopMeasurement()
            expectRecorded(agent, recorded - run.recorded, since: before)
            run.recorded = recorded
        }
    }

    // What the interval aggregates hold: 10,000 endpoints (distinct modules), one request each, with the
    // rendered series and learned path each needs (and no request line); resident memory over the agent's
    // before them.
    let endpoints = 10_000
    let aggregates = RecordRun()
    Benchmark(
        "interval aggregates: resident memory of 10,000 endpoints",
        configuration: .init(
            metrics: [.peakMemoryResidentDelta, .mallocCountTotal],
            // The endpoints are made once: a warm-up run would leave nothing to measure.
            warmupIterations: 0,
            maxIterations: 1,
            setup: {
                aggregates.agent = makeAgent(spool: nil) {
                    $0.capture.maximumDistinctPaths = 2 * endpoints
                    $0.aggregation?.maximumEndpoints = endpoints
                    // No request lines among what is measured: the aggregates, and the series and paths they need.
                    $0.capture.rawPoints = .none
                }
            },
            teardown: { aggregates.agent = nil }
        )
    ) { benchmark in
        guard let agent = aggregates.agent else { fatalError("no agent: the setup did not run") }
        var next = sample
        let before = agent.metrics.intervalPoints
        benchmark.startMeasurement()
        for index in 0..<endpoints {
            // Distinct modules: distinct hosts would be folded into one (`h123.example.com` is `*.example.com`).
            next.module = "m\(index)"
            next.startedAt = instant(index)
            agent.record(next)
        }
        agent.waitUntilRecorded()
        benchmark.stopMeasurement()
        let intervals = agent.recordIntervalPoints(
            endingAt: Timestamp(nanosecondsSinceEpoch: 1_700_000_010_000_000_000)
        )
        precondition(
            intervals && agent.metrics.intervalPoints - before == UInt64(endpoints),
            "\(agent.metrics.intervalPoints - before) interval points for \(endpoints) endpoints"
        )
    }

    Benchmark(
        "record sample from 4 threads at once (100,000 samples)",
        configuration: .init(metrics: [.wallClock, .cpuTotal], maxIterations: 50)
    ) { benchmark in
        let agent = makeAgent(spool: nil)
        let base = 1_700_000_000 + Double(Int(Date().timeIntervalSince1970) % 1_000_000)
        for iteration in benchmark.scaledIterations {
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                var next = sample
                for index in 0..<25_000 {
                    let microseconds: Int = (iteration * 4 + thread) * 25_000 + index
                    next.startedAt = Date(timeIntervalSince1970: base + Double(microseconds) / 1_000_000)
                    agent.record(next)
                }
            }
            agent.waitUntilRecorded()
        }
        expectRecorded(agent, benchmark.scaledIterations.count * 100_000)
    }

    // Instrumented vs plain URLSession: sequential small GETs to a local server, in one run.
    let server = LockedServer()
    // Running, as in a service: its write-through loop encodes the captured samples every 20 ms, off
    // the requests' path.
    let getAgent = makeAgent(spool: nil)
    getAgent.start()
    let sessions = [false, true].map { instrumented -> URLSession in
        let configuration = URLSessionConfiguration.ephemeral
        if instrumented { getAgent.instrument(configuration, module: "bench") }
        return URLSession(configuration: configuration)
    }
    for instrumented in [false, true] {
        Benchmark(
            "GET small response, \(instrumented ? "instrumented" : "plain") URLSession",
            configuration: .init(metrics: [.wallClock, .cpuTotal], maxDuration: .seconds(60), maxIterations: 10_000)
        ) { benchmark in
            let base = server.url()
            let session = sessions[instrumented ? 1 : 0]
            let request = URLRequest(url: URL(string: base + "/users/1")!)
            let recordedBefore = getAgent.metrics.pointsRecorded
            for _ in benchmark.scaledIterations {
                let done = DispatchSemaphore(value: 0)
                session.dataTask(with: request) { data, _, _ in
                    blackHole(data)
                    done.signal()
                }.resume()
                done.wait()
            }
            // The agent lives as long as the benchmarks (the hook holds it weakly): an instrumented run
            // records exactly one sample per request, a plain run none.
            let recorded = getAgent.metrics.pointsRecorded - recordedBefore
            let expected = instrumented ? UInt64(benchmark.scaledIterations.count) : 0
            precondition(
                recorded == expected,
                "recorded \(recorded) samples for \(benchmark.scaledIterations.count) requests"
            )
        }
    }

    // Instrumented vs plain AsyncHTTPClient: 10,000 sequential small GETs to the same server, in one run.
    let httpClient = HTTPClient(eventLoopGroupProvider: .singleton)
    for instrumented in [false, true] {
        Benchmark(
            "GET small response, \(instrumented ? "instrumented" : "plain") AsyncHTTPClient",
            configuration: .init(metrics: [.wallClock, .cpuTotal], maxDuration: .seconds(60), maxIterations: 10_000)
        ) { benchmark in
            let request = HTTPClientRequest(url: server.url() + "/users/1")
            let recordedBefore = getAgent.metrics.pointsRecorded
            let iterations = benchmark.scaledIterations.count
            wait {
                for _ in 0..<iterations {
                    let response =
                        instrumented
                        ? try! await httpClient.execute(
                            request,
                            timeout: .seconds(10),
                            recordingTo: getAgent,
                            module: "bench"
                        )
                        : try! await httpClient.execute(request, timeout: .seconds(10))
                    blackHole(try! await response.body.collect(upTo: 1 << 16))
                }
            }
            let recorded = getAgent.metrics.pointsRecorded - recordedBefore
            precondition(
                recorded == (instrumented ? UInt64(iterations) : 0),
                "recorded \(recorded) samples for \(iterations) requests"
            )
        }
    }

    // The same comparison with plain and instrumented requests alternating in one loop, so both
    // see the same machine at the same moment: each request is timed alone, and at the end the
    // medians of each kind and their difference are printed. The benchmark's own figure is one pair.
    // (Both kinds plain, the medians differ by up to 4 µs: the noise floor of this comparison.)
    let pairs = PairTimes()
    Benchmark(
        "GET small response, plain and instrumented AsyncHTTPClient alternating (one pair per iteration)",
        configuration: .init(
            metrics: [.wallClock, .cpuTotal],
            maxDuration: .seconds(60),
            maxIterations: 10_000,
            teardown: { pairs.report("AsyncHTTPClient") }
        )
    ) { benchmark in
        let request = HTTPClientRequest(url: server.url() + "/users/1")
        let recordedBefore = getAgent.metrics.pointsRecorded
        let iterations = benchmark.scaledIterations.count
        // Plain, instrumented, instrumented, plain, …: neither kind always goes first.
        let instrumentedFirst = pairs.instrumentedFirst()
        wait {
            for index in 0..<(2 * iterations) {
                let recording = (index % 2 == 0) == instrumentedFirst
                let started = ContinuousClock.now
                let response =
                    recording
                    ? try! await httpClient.execute(
                        request,
                        timeout: .seconds(10),
                        recordingTo: getAgent,
                        module: "bench"
                    )
                    : try! await httpClient.execute(request, timeout: .seconds(10))
                blackHole(try! await response.body.collect(upTo: 1 << 16))
                pairs.add(ContinuousClock.now - started, instrumented: recording)
            }
        }
        let recorded = getAgent.metrics.pointsRecorded - recordedBefore
        precondition(
            recorded == UInt64(iterations),
            "recorded \(recorded) samples for \(iterations) instrumented requests"
        )
    }

    let sessionPairs = PairTimes()
    Benchmark(
        "GET small response, plain and instrumented URLSession alternating (one pair per iteration)",
        configuration: .init(
            metrics: [.wallClock, .cpuTotal],
            maxDuration: .seconds(60),
            maxIterations: 10_000,
            teardown: { sessionPairs.report("URLSession") }
        )
    ) { benchmark in
        let request = URLRequest(url: URL(string: server.url() + "/users/1")!)
        let recordedBefore = getAgent.metrics.pointsRecorded
        let iterations = benchmark.scaledIterations.count
        let instrumentedFirst = sessionPairs.instrumentedFirst()
        for index in 0..<(2 * iterations) {
            let recording = (index % 2 == 0) == instrumentedFirst
            let done = DispatchSemaphore(value: 0)
            let started = ContinuousClock.now
            sessions[recording ? 1 : 0].dataTask(with: request) { data, _, _ in
                blackHole(data)
                done.signal()
            }.resume()
            done.wait()
            sessionPairs.add(ContinuousClock.now - started, instrumented: recording)
        }
        let recorded = getAgent.metrics.pointsRecorded - recordedBefore
        precondition(
            recorded == UInt64(iterations),
            "recorded \(recorded) samples for \(iterations) instrumented requests"
        )
    }

    if let victoria = ProcessInfo.processInfo.environment["APIHEALTH_BENCH_VICTORIA_URL"].flatMap(URL.init(string:)) {
        // The whole agent against gzip alone, in one run: CPU per point of recording, batching,
        // gzipping and posting 200,000 points to VictoriaMetrics, over the CPU gzip alone takes for
        // the very same lines (the agent's own, read back from a spool), batch by batch at the
        // agent's level. Fails if a point did not reach the server.
        let points = 200_000
        let samples = (0..<points).map { index -> RequestSample in
            var point = sample
            point.startedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(index) / 1_000_000)
            point.duration = .nanoseconds(5_000_000 + index * 7_919 % 400_000_000)
            return point
        }
        Benchmark(
            "pipeline: 200,000 points recorded, gzipped and written to VictoriaMetrics",
            configuration: .init(
                metrics: [.wallClock, .cpuTotal, .throughput, .peakMemoryResident],
                scalingFactor: .one,
                maxDuration: .seconds(60),
                maxIterations: 10
            )
        ) { benchmark in
            let lines = agentLines(samples)
            var gzipCPU = Duration.zero
            var zlibCPU = Duration.zero
            var postCPU = Duration.zero
            var pipelineCPU = Duration.zero
            var pipelineWall = Duration.zero
            var recordCPU = Duration.zero
            for _ in benchmark.scaledIterations {
                // Gzip's memory kept from batch to batch, as the agent's spool worker keeps it.
                let workspace = GzipWorkspace()
                let gzipStarted = processCPUTime()
                var body: [UInt8] = []
                for batch in lines {
                    body.removeAll(keepingCapacity: true)
                    try! Gzip.compress(batch, level: 1, into: &body, keeping: workspace)
                    blackHole(body.count)
                }
                gzipCPU += processCPUTime() - gzipStarted
                // The floor the transport sets: the same batches, gzipped already, posted one request
                // each through a URLSession set up as the shipper's.
                let bodies = lines.map { try! Gzip.compress($0, level: 1) }
                let postStarted = processCPUTime()
                wait { await postBodies(bodies, to: victoria) }
                postCPU += processCPUTime() - postStarted
                let zlibStarted = processCPUTime()
                for batch in lines {
                    body.removeAll(keepingCapacity: true)
                    try! Gzip.compress(batch, level: 1, using: .zlib, into: &body)
                    blackHole(body.count)
                }
                zlibCPU += processCPUTime() - zlibStarted

                // No cap in the way: the points are recorded faster than any server takes them.
                let agent = makeAgent(spool: nil, destination: victoria, pendingCap: 1 << 30)
                let started = ContinuousClock.now
                let cpuStarted = processCPUTime()
                agent.start()
                let recordStarted = threadCPUTime()
                let loopStarted = agent.recordLoopCPUTime
                // Each sample passed where it lies, not copied first (a copy is the caller's cost).
                samples.withUnsafeBufferPointer { samples in
                    for index in samples.indices { agent.record(samples[index]) }
                }
                agent.waitUntilRecorded()
                // Recording is the caller's queuing and the record loop's work.
                recordCPU += threadCPUTime() - recordStarted + agent.recordLoopCPUTime - loopStarted
                wait { await agent.shutdown(deadline: .seconds(60)) }
                pipelineCPU += processCPUTime() - cpuStarted
                pipelineWall += ContinuousClock.now - started
                let metrics = agent.metrics
                // The points, the interval point of their endpoint and the agent's last health point.
                precondition(
                    metrics.pointsWritten == UInt64(points) + metrics.intervalPoints + 1 && metrics.pendingLines == 0
                        && metrics.pointsDropped == 0,
                    "\(metrics.pointsWritten) of \(points) points, \(metrics.intervalPoints) interval points and a health point written, \(metrics.pendingLines) pending"
                )
            }
            let runs = Double(benchmark.scaledIterations.count)
            let perPoint = pipelineCPU / (Int(runs) * points)
            let gzipPerPoint = gzipCPU / (Int(runs) * points)
            let recordPerPoint = recordCPU / (Int(runs) * points)
            let zlibPerPoint = zlibCPU / (Int(runs) * points)
            let postPerPoint = postCPU / (Int(runs) * points)
            let rate =
                Double(points) * runs
                / (Double(pipelineWall.components.seconds) + Double(pipelineWall.components.attoseconds) / 1e18)
            print(
                "pipeline (\(Gzip.implementation.rawValue)): CPU per point \(perPoint) (recording \(recordPerPoint)), gzip level 1 of its line \(gzipPerPoint), "
                    + "ratio \(String(format: "%.2f", ratioOf(perPoint, gzipPerPoint))) (zlib's gzip of the line \(zlibPerPoint)); "
                    + "posting the gzipped batches alone \(postPerPoint) a point: gzip and posting, before any recording, "
                    + "\(String(format: "%.2f", ratioOf(gzipPerPoint + postPerPoint, gzipPerPoint))) times gzip; "
                    + "\(Int(rate)) points/s into VictoriaMetrics"
            )
        }
    }

    Benchmark(
        "1,000,000 points while the server is down (16 MiB cap)",
        configuration: .init(metrics: [.wallClock, .peakMemoryResident, .peakMemoryResidentDelta], maxIterations: 3)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            let agent = makeAgent(spool: nil, destination: URL(string: "http://127.0.0.1:9")!, pendingCap: 16 << 20)
            agent.start()
            var next = sample
            for index in 0..<1_000_000 {
                next.startedAt = instant(index)
                agent.record(next)
            }
            expectRecorded(agent, 1_000_000)
            precondition(agent.metrics.pendingBytes <= 17 << 20)
            wait { await agent.shutdown(deadline: .milliseconds(100)) }
        }
    }

    // In a process of its own (record-stall's `memory` run), so that nothing another benchmark allocated
    // and freed first is reused and hides what the pending data holds: the spool on, the destination
    // down, the default 64 MiB cap, twice the cap recorded as fast as one thread can.
    if let recordStall = ProcessInfo.processInfo.environment["RECORD_STALL_BIN"] {
        let peakMiB = BenchmarkMetric.custom("resident peak over baseline (MiB)", useScalingFactor: false)
        let heldMiB = BenchmarkMetric.custom("resident held over baseline (MiB)", useScalingFactor: false)
        Benchmark(
            "64 MiB cap full while the server is down: resident memory over baseline",
            configuration: .init(
                metrics: [peakMiB, heldMiB],
                warmupIterations: 0,
                maxIterations: 3,
                // From run to run the figures move by up to 50 MiB (when compressing the backlog lags):
                // the run's own precondition, the cap + 16 MiB, is what fails it.
                thresholds: [peakMiB: .init(absolute: [.p90: 50]), heldMiB: .init(absolute: [.p90: 50])]
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                let output = Pipe()
                let process = Process()
                process.environment = childEnvironment
                process.executableURL = URL(fileURLWithPath: recordStall)
                process.arguments = ["memory", "0"]
                process.standardOutput = output
                try! process.run()
                let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                // memory: … pending 63.4 MiB (cap 64 MiB), … dropped; resident +31.8 MiB peak, +29.0 MiB now
                guard process.terminationStatus == 0,
                    let figures = printed.firstMatch(
                        of: /pending ([0-9.]+) MiB.*resident \+([0-9.]+) MiB peak, \+([0-9.-]+) MiB now/
                    ),
                    let pending = Double(figures.1), let peak = Double(figures.2), let held = Double(figures.3)
                else { preconditionFailure("record-stall memory: \(process.terminationStatus) \(printed)") }
                precondition(pending > 60, "the cap was not reached: \(printed)")
                precondition(peak <= 64 + 16, "resident memory grew \(peak) MiB: more than the cap + 16 MiB")
                benchmark.measurement(peakMiB, Int(peak.rounded()))
                benchmark.measurement(heldMiB, Int(held.rounded()))
            }
        }
    }

    if let tail = ProcessInfo.processInfo.environment["INFLUX_TAIL_BIN"] {
        let spool = temporaryDirectory("tail")
        Benchmark(
            "influx-tail prints 1,000,000 pending lines",
            configuration: .init(
                metrics: [.wallClock],
                maxIterations: 5,
                setup: {
                    let agent = makeAgent(spool: spool, pendingCap: 1 << 30)
                    agent.start()
                    var next = sample
                    for index in 0..<1_000_000 {
                        next.startedAt = instant(index)
                        agent.record(next)
                    }
                    expectRecorded(agent, 1_000_000)
                    wait { await agent.shutdown(deadline: .seconds(5)) }
                },
                teardown: { try? FileManager.default.removeItem(at: spool) }
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                let process = Process()
                process.environment = childEnvironment
                process.executableURL = URL(fileURLWithPath: tail)
                process.arguments = ["--spool", spool.path]
                process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
                try! process.run()
                process.waitUntilExit()
                precondition(process.terminationStatus == 0)
            }
        }

        // 1,000,000 request lines over 20 endpoints, about one in ten failed, spread over an hour.
        let summarySpool = temporaryDirectory("summary")
        let summaryLines = 1_000_000
        Benchmark(
            "influx-tail --summary of 1,000,000 pending lines (at most 3 s)",
            configuration: .init(
                metrics: [.wallClock, .peakMemoryResident],
                maxIterations: 5,
                setup: {
                    let agent = makeAgent(spool: summarySpool, pendingCap: 1 << 30)
                    agent.start()
                    let start = Date().addingTimeInterval(-3_600)
                    for index in 0..<summaryLines {
                        agent.record(
                            RequestSample(
                                method: index % 2 == 0 ? "GET" : "POST",
                                url: URL(
                                    string:
                                        "https://api\(index % 5).example.com/v1/resource\(index / 2 % 2)/\(index % 7_919)"
                                )!,
                                module: "checkout",
                                startedAt: start.addingTimeInterval(Double(index) * 0.0036),
                                duration: .microseconds(5_000 + (index * 7_919) % 400_000),
                                statusCode: index % 10 == 0 ? 503 : 200,
                                requestBytes: 312,
                                responseBytes: 5_120,
                                correlationID: "7f9c2ba4-e88f-4c1b-9d21-3b6f0c9a1e55"
                            )
                        )
                    }
                    wait { await agent.shutdown(deadline: .seconds(5)) }
                },
                teardown: { try? FileManager.default.removeItem(at: summarySpool) }
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                let output = temporaryDirectory("summary-out").appendingPathComponent("table")
                _ = FileManager.default.createFile(atPath: output.path, contents: nil)
                guard let handle = FileHandle(forWritingAtPath: output.path) else {
                    fatalError("cannot write \(output.path)")
                }
                let process = Process()
                process.environment = childEnvironment
                process.executableURL = URL(fileURLWithPath: tail)
                process.arguments = ["--spool", summarySpool.path, "--summary", "--format", "json"]
                process.standardOutput = handle
                let started = ContinuousClock.now
                do {
                    try process.run()
                } catch {
                    fatalError("influx-tail did not start: \(error)")
                }
                process.waitUntilExit()
                let elapsed = ContinuousClock.now - started
                try? handle.close()
                precondition(
                    process.terminationStatus == 0,
                    "influx-tail --summary exited \(process.terminationStatus)"
                )
                let rows = ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").compactMap
                {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                let requests = rows.reduce(0) { $0 + ($1["requests"] as? Int ?? 0) }
                print("influx-tail --summary: \(requests) requests in \(rows.count) rows in \(elapsed)")
                precondition(requests == summaryLines, "the summary counted \(requests) requests, not \(summaryLines)")
                precondition(rows.count == 20, "\(rows.count) rows, not one per endpoint (20)")
                precondition(
                    elapsed <= .seconds(3),
                    "the summary of \(summaryLines) lines took \(elapsed): more than 3 s"
                )
                try? FileManager.default.removeItem(at: output.deletingLastPathComponent())
            }
        }

        Benchmark(
            "influx-tail --follow shows a recorded line",
            configuration: .init(metrics: [.wallClock], maxDuration: .seconds(10), maxIterations: 50)
        ) { benchmark in
            let followed = temporaryDirectory("follow")
            let agent = makeAgent(spool: followed)
            agent.start()
            let process = Process()
            process.environment = childEnvironment
            process.executableURL = URL(fileURLWithPath: tail)
            process.arguments = ["--spool", followed.path, "-f"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try! process.run()
            var seen = Data()
            for iteration in benchmark.scaledIterations {
                let marker = "n=\(iteration)i"
                benchmark.startMeasurement()
                agent.write(Point(measurement: "follow", fields: [Point.Field("n", .int(Int64(iteration)))]))
                while !String(decoding: seen, as: UTF8.self).contains(marker) {
                    seen.append(pipe.fileHandleForReading.availableData)
                }
                benchmark.stopMeasurement()
            }
            process.terminate()
            wait { await agent.shutdown(deadline: .milliseconds(100)) }
            try? FileManager.default.removeItem(at: followed)
        }
    }

    boundedTrafficBenchmarks()
}

/// Request times of the alternating benchmark, by kind, in the order they were made.
final class PairTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var plain: [Duration] = []
    private var instrumented: [Duration] = []
    private var turns = 0

    /// Whether the next pair starts with the instrumented request (every other pair).
    func instrumentedFirst() -> Bool {
        lock.withLock {
            turns += 1
            return turns % 2 == 0
        }
    }

    func add(_ time: Duration, instrumented isInstrumented: Bool) {
        lock.withLock {
            if isInstrumented { instrumented.append(time) } else { plain.append(time) }
        }
    }

    /// Prints both medians, their difference and the median of the differences within each pair (a
    /// pair's two requests run back to back, so what the machine does meanwhile weighs on both
    /// alike), and forgets them.
    func report(_ client: String) {
        lock.withLock {
            guard !plain.isEmpty, plain.count == instrumented.count else { return }
            let plainMedian = plain.sorted()[plain.count / 2]
            let instrumentedMedian = instrumented.sorted()[instrumented.count / 2]
            let differences = zip(instrumented, plain).map { $0 - $1 }.sorted()
            let pairedMedian = differences[differences.count / 2]
            print(
                "\(client), \(instrumented.count) requests of each kind, alternating: median plain \(plainMedian), instrumented "
                    + "\(instrumentedMedian), added \(instrumentedMedian - plainMedian) "
                    + "(\(String(format: "%+.2f", (ratioOf(instrumentedMedian, plainMedian) - 1) * 100)) %); "
                    + "median added within a pair \(pairedMedian) "
                    + "(\(String(format: "%+.2f", ratioOf(pairedMedian, plainMedian) * 100)) %)"
            )
            plain = []
            instrumented = []
        }
    }
}

/// An agent kept between a benchmark's iterations, and how many samples it has been given.
final class RecordRun: @unchecked Sendable {
    var agent: APIHealthAgent?
    var spool: URL?
    var recorded = 0
    /// The URLs a run records, made in its setup and let go in its teardown: made when the benchmarks are
    /// registered, they would stay resident under every benchmark's memory figures.
    var urls: [URL] = []
}

/// Fails the run unless `agent` stored exactly `count` points since it had stored `before` (none
/// declined, dropped or refused).
func expectRecorded(_ agent: APIHealthAgent, _ count: Int, since before: UInt64 = 0) {
    let metrics = agent.metrics
    precondition(
        metrics.pointsRecorded - before == UInt64(count) && metrics.pointsInvalid == 0,
        "recorded \(metrics.pointsRecorded) of \(count) samples (\(metrics.pointsInvalid) invalid, \(metrics.pointsDropped) dropped)"
    )
}

/// Fails the run unless every one of `count` samples since `before` was stored as a point or counted only
/// in its interval aggregate (none declined, dropped or refused).
func expectRecorded(_ agent: APIHealthAgent, _ count: Int, since before: AgentMetrics) {
    let metrics = agent.metrics
    let taken =
        (metrics.pointsRecorded - before.pointsRecorded)
        + (metrics.requestsOnlyAggregated - before.requestsOnlyAggregated)
    precondition(
        taken == UInt64(count) && metrics.pointsInvalid == 0,
        "took \(taken) of \(count) samples (\(metrics.pointsInvalid) invalid, \(metrics.pointsDropped) dropped)"
    )
}

/// The lines the agent writes for `samples`, batch by batch as the shipper cuts them (read back from
/// a spool).
func agentLines(_ samples: [RequestSample]) -> [[UInt8]] {
    let spool = temporaryDirectory("lines")
    defer { try? FileManager.default.removeItem(at: spool) }
    let agent = makeAgent(spool: spool, pendingCap: 1 << 30)
    agent.start()
    for point in samples { agent.record(point) }
    wait { await agent.shutdown(deadline: .seconds(10)) }
    let files = ((try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []).filter {
        $0.hasSuffix(".lp")
    }.sorted()
    // The request lines only (not the agent's health point), batch by batch.
    var lines = 0
    let batches = files.compactMap { name -> [UInt8]? in
        guard let contents = FileManager.default.contents(atPath: spool.appendingPathComponent(name).path) else {
            return nil
        }
        var batch: [UInt8] = []
        for line in contents.split(separator: UInt8(ascii: "\n"))
        where line.starts(with: Array("apihealth_request,".utf8)) {
            batch += line
            batch.append(UInt8(ascii: "\n"))
            lines += 1
        }
        return batch
    }
    precondition(lines == samples.count, "the spool holds \(lines) request lines for \(samples.count) samples")
    return batches
}

/// A session set up as the shipper's: ephemeral, one connection to the server.
let postingSession: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = 1
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    return URLSession(configuration: configuration)
}()

/// Posts each gzip body to the InfluxDB v2 write endpoint at `server`, one request after another, as
/// the shipper does; fails unless the server stores every one (204).
func postBodies(_ bodies: [[UInt8]], to server: URL) async {
    var components = URLComponents(url: server.appendingPathComponent("api/v2/write"), resolvingAgainstBaseURL: false)!
    components.queryItems = [
        URLQueryItem(name: "org", value: "o"), URLQueryItem(name: "bucket", value: "b"),
        URLQueryItem(name: "precision", value: "ns"),
    ]
    let url = components.url!
    for body in bodies {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        request.setValue("text/plain; charset=utf-8", forHTTPHeaderField: "Content-Type")
        do {
            let status = (try await postingSession.data(for: request).1 as? HTTPURLResponse)?.statusCode
            precondition(status == 204, "posting a gzipped batch: HTTP \(status.map(String.init) ?? "?")")
        } catch {
            preconditionFailure("posting a gzipped batch: \(error)")
        }
    }
}

/// CPU time the calling thread has used.
func threadCPUTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec))
}

/// CPU time (user and system, every thread) this process has used.
func processCPUTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec))
}

func ratioOf(_ lhs: Duration, _ rhs: Duration) -> Double {
    let left = lhs.components
    let right = rhs.components
    return (Double(left.seconds) + Double(left.attoseconds) / 1e18)
        / (Double(right.seconds) + Double(right.attoseconds) / 1e18)
}

/// The loopback server, started on first use and shared by the GET benchmarks.
final class LockedServer: @unchecked Sendable {
    private let lock = NSLock()
    private var server: LoopbackHTTPServer?

    func url() -> String {
        lock.withLock {
            if server == nil {
                let started = UnsafeBox<LoopbackHTTPServer>()
                wait {
                    started.value = try! await LoopbackHTTPServer.start(threads: 1) { _ in
                        .json(200, #"{"id":1,"name":"Ada"}"#)
                    }
                }
                server = started.value
            }
            return server!.baseURL
        }
    }
}

final class UnsafeBox<Value>: @unchecked Sendable {
    var value: Value?
}

/// The environment of the programs the benchmarks run (influx-tail, record-stall): the benchmark's,
/// without the allocation counter the plugin preloads into it on Linux, which would otherwise count,
/// slow and hold the child's allocations too.
let childEnvironment = ProcessInfo.processInfo.environment.filter { $0.key != "LD_PRELOAD" }
