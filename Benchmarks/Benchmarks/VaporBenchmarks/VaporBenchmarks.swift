@_spi(Package) import APIHealth
import APIHealthTestKit
import APIHealthVapor
import Benchmark
import BenchmarkTolerances
import Foundation
import Logging
import Vapor

/// Blocks the calling thread until `body` finishes (benchmarks are synchronous closures here).
func wait(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}

final class UnsafeBox<Value>: @unchecked Sendable {
    var value: Value?
}

/// A recorded `req.client` call beside the same call unrecorded: two Vapor applications on one event
/// loop group, one with Vapor's own client (`.http`), one with `.apihealth(agent, module:)`, each
/// calling the same loopback API (`GET /users/1`, a small JSON body) through a `Request`'s `client`,
/// alternating within each pair so that the machine's load weighs on both alike.
final class VaporPair: @unchecked Sendable {
    let api: LoopbackHTTPServer
    let agent: APIHealthAgent
    let plain: Application
    let recorded: Application

    init() {
        let api = UnsafeBox<LoopbackHTTPServer>()
        wait {
            api.value = try! await LoopbackHTTPServer.start(threads: 1) { _ in .json(200, #"{"id":1,"name":"Ada"}"#) }
        }
        self.api = api.value!
        var configuration = APIHealthConfiguration(serviceName: "bench", destination: nil)
        configuration.spool = nil
        // Only the requests' own points during a run: no health point.
        configuration.selfMetricsInterval = .seconds(3_600)
        // Requests are aggregated as by default, but no interval ends during a run; each request is also a
        // point of its own.
        configuration.aggregation?.interval = .seconds(3_600)
        configuration.capture.rawPoints = .all
        agent = try! APIHealthAgent(configuration: configuration, logger: Logger(label: "bench"))
        agent.start()
        let made = UnsafeBox<(Application, Application)>()
        let agent = agent
        wait {
            let plain = try! await Application.make(.testing, .shared(MultiThreadedEventLoopGroup.singleton))
            plain.clients.use(.http)
            let recorded = try! await Application.make(.testing, .shared(MultiThreadedEventLoopGroup.singleton))
            recorded.clients.use(.apihealth(agent, module: "bench"))
            made.value = (plain, recorded)
        }
        (plain, recorded) = made.value!
    }

    /// One `req.client.get` through `app`, its body read.
    func call(_ app: Application) async {
        let request = Request(application: app, on: app.eventLoopGroup.next())
        let response = try! await request.client.get(URI(string: api.baseURL + "/users/1"))
        precondition(response.status == .ok)
        blackHole(response.body?.readableBytes)
    }
}

/// The times of plain and recorded calls made in pairs, and their medians.
final class PairTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var plain: [Duration] = []
    private var recorded: [Duration] = []

    func add(_ time: Duration, recorded isRecorded: Bool) {
        lock.withLock { if isRecorded { recorded.append(time) } else { plain.append(time) } }
    }

    /// Prints both medians and the median difference within a pair (a pair's two calls run back to
    /// back, so what the machine does meanwhile weighs on both alike), and forgets them.
    func report() {
        lock.withLock {
            guard !plain.isEmpty, plain.count == recorded.count else { return }
            let plainMedian = plain.sorted()[plain.count / 2]
            let recordedMedian = recorded.sorted()[recorded.count / 2]
            let withinPair = zip(recorded, plain).map { $0 - $1 }.sorted()[plain.count / 2]
            print(
                "req.client, \(plain.count) calls of each kind, alternating: median plain \(plainMedian), "
                    + "recorded \(recordedMedian); median added within a pair \(withinPair)"
            )
            plain = []
            recorded = []
        }
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal],
        maxDuration: .seconds(30),
        maxIterations: 10_000,
        thresholds: tolerances
    )
    let pair = VaporPair()
    for recording in [false, true] {
        Benchmark("req.client GET small response, \(recording ? "recorded" : "plain")") { benchmark in
            let app = recording ? pair.recorded : pair.plain
            let recordedBefore = pair.agent.metrics.pointsRecorded
            let iterations = benchmark.scaledIterations.count
            wait {
                for _ in 0..<iterations { await pair.call(app) }
            }
            if recording {
                // Each recorded call is one point (recorded off the call's path, within 20 ms).
                let expected = recordedBefore + UInt64(iterations)
                let end = ContinuousClock.now + .seconds(30)
                while pair.agent.metrics.pointsRecorded < expected && ContinuousClock.now < end {
                    Thread.sleep(forTimeInterval: 0.005)
                }
                precondition(pair.agent.metrics.pointsRecorded == expected, "a recorded call was not recorded")
            }
        }
    }

    // Plain and recorded alternating, the first of each pair changing every iteration.
    let pairs = PairTimes()
    Benchmark(
        "req.client GET small response, plain and recorded alternating (one pair per iteration)",
        configuration: .init(
            metrics: [.wallClock, .cpuTotal],
            maxDuration: .seconds(60),
            maxIterations: 10_000,
            teardown: { pairs.report() }
        )
    ) { benchmark in
        let recordedBefore = pair.agent.metrics.pointsRecorded
        let iterations = benchmark.scaledIterations.count
        wait {
            for index in 0..<(2 * iterations) {
                let recording = (index % 2 == 0) == ((index / 2) % 2 == 0)
                let started = ContinuousClock.now
                await pair.call(recording ? pair.recorded : pair.plain)
                pairs.add(ContinuousClock.now - started, recorded: recording)
            }
        }
        let expected = recordedBefore + UInt64(iterations)
        let end = ContinuousClock.now + .seconds(30)
        while pair.agent.metrics.pointsRecorded < expected && ContinuousClock.now < end {
            Thread.sleep(forTimeInterval: 0.005)
        }
        precondition(pair.agent.metrics.pointsRecorded == expected, "a recorded call was not recorded")
    }
}
