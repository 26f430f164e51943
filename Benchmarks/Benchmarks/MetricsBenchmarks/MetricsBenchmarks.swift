import APIHealth
import APIHealthMetrics
import Benchmark
import BenchmarkTolerances
import CoreMetrics
import Foundation
import LineProtocol
import Logging

/// An agent that keeps its points in a spool (no server), a factory writing through it, and a way to read
/// back what the factory wrote: each benchmark checks the values it measured arrived.
final class MetricsRig: Sendable {
    let spool: URL
    let agent: APIHealthAgent
    let factory: APIHealthMetricsFactory

    init(spooled: Bool = true) {
        spool = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apihealth-bench-metrics-\(UUID().uuidString)"
        )
        var configuration = APIHealthConfiguration(serviceName: "bench", destination: nil)
        configuration.spool = spooled ? SpoolOptions(directory: spool) : nil
        configuration.batching.maximumPendingBytes = 256 << 20
        agent = try! APIHealthAgent(configuration: configuration, logger: Logger(label: "bench"))
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)  // flushed by hand
        factory = APIHealthMetricsFactory(agent: agent, configuration: options)
    }

    /// Flushes, shuts the agent down and returns the points of `measurement` in the spool.
    func written(_ measurement: String) -> [Point] {
        factory.flush()
        let done = DispatchSemaphore(value: 0)
        Task.detached { [agent] in
            await agent.shutdown(deadline: .seconds(1))
            done.signal()
        }
        done.wait()
        defer { try? FileManager.default.removeItem(at: spool) }
        let lines = (try? SpoolReader(directory: spool).segments().flatMap(\.lines)) ?? []
        let parser = LineParser(precision: .ns)
        return lines.compactMap { try? parser.parse($0 + [UInt8(ascii: "\n")]) }.flatMap { $0 }.filter {
            $0.measurement == measurement
        }
    }

    func count(of measurement: String) -> UInt64? {
        guard case .uint(let count)? = written(measurement).last?.field("count") else { return nil }
        return count
    }
}

/// Runs `body(thread)` on `threads` new threads at once and waits for all of them.
func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for thread in 0..<threads {
        group.enter()
        Thread.detachNewThread {
            body(thread)
            group.leave()
        }
    }
    group.wait()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        maxDuration: .seconds(3),
        maxIterations: 50,
        thresholds: tolerances
    )

    Benchmark("Counter.increment() (uncontended, per call)", configuration: .init(scalingFactor: .mega)) { benchmark in
        let rig = MetricsRig()
        let counter = Counter(label: "bench_counter", dimensions: [("route", "/users/{id}")], factory: rig.factory)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { counter.increment() }
        benchmark.stopMeasurement()
        let total = rig.count(of: "bench_counter")
        precondition(total == UInt64(benchmark.scaledIterations.count), "counted \(String(describing: total))")
    }

    Benchmark("Timer.recordNanoseconds (uncontended, per call)", configuration: .init(scalingFactor: .mega)) {
        benchmark in
        let rig = MetricsRig()
        let timer = CoreMetrics.Timer(label: "bench_timer", dimensions: [("db", "orders")], factory: rig.factory)
        // Warm the sketch's range (its storage is allocated once and kept), as a long-running timer has.
        // Both of its buffers (one is written while the other is summarised).
        for _ in 0..<2 {
            for value in stride(from: 1_000 as Int64, through: 1_000_000_000, by: 1_000_000) {
                timer.recordNanoseconds(value)
            }
            rig.factory.flush()
        }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { timer.recordNanoseconds(Int64(1_000 + (index & 0xFFFF) * 15_000)) }
        benchmark.stopMeasurement()
        let count = rig.count(of: "bench_timer")
        precondition(count == UInt64(benchmark.scaledIterations.count), "recorded \(String(describing: count))")
    }

    // One counter, 8,000,000 increments split over 1, 2 or 8 threads: ns per increment = wall clock / 8M.
    for threads in [1, 2, 8] {
        Benchmark(
            "Counter.increment() 8,000,000 times from \(threads) thread(s)",
            configuration: .init(metrics: [.wallClock, .cpuTotal], maxIterations: 10)
        ) { benchmark in
            let rig = MetricsRig()
            let counter = Counter(label: "bench_shared", dimensions: [], factory: rig.factory)
            let perThread = 8_000_000 / threads
            benchmark.startMeasurement()
            onThreads(threads) { _ in
                for _ in 0..<perThread { counter.increment() }
            }
            benchmark.stopMeasurement()
            let total = rig.count(of: "bench_shared")
            precondition(total == 8_000_000, "counted \(String(describing: total))")
        }
    }

    // The control for the above: the same 8,000,000 increments on 2 threads, each on its own counter. When it
    // takes as long as one shared counter, sharing costs nothing; when both take as long as 1 thread, the
    // second core was busy elsewhere.
    Benchmark(
        "Counter.increment() 8,000,000 times from 2 thread(s), a counter each",
        configuration: .init(metrics: [.wallClock, .cpuTotal], maxIterations: 10)
    ) { benchmark in
        let rig = MetricsRig()
        let counters = (0..<2).map { Counter(label: "bench_own_\($0)", dimensions: [], factory: rig.factory) }
        benchmark.startMeasurement()
        onThreads(2) { thread in
            let counter = counters[thread]  // not fetched (and retained) per increment
            for _ in 0..<4_000_000 { counter.increment() }
        }
        benchmark.stopMeasurement()
        let total = rig.count(of: "bench_own_0")
        precondition(total == 4_000_000, "counted \(String(describing: total))")
    }

    Benchmark(
        "flush 10,000 handlers (7,000 counters, 3,000 timers with 10 values each)",
        configuration: .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal], maxIterations: 20)
    ) { benchmark in
        let rig = MetricsRig(spooled: false)
        let counters = (0..<7_000).map {
            Counter(label: "bench_flush_counter", dimensions: [("n", "\($0)")], factory: rig.factory)
        }
        let timers = (0..<3_000).map {
            CoreMetrics.Timer(label: "bench_flush_timer", dimensions: [("n", "\($0)")], factory: rig.factory)
        }
        for counter in counters { counter.increment() }
        for (index, timer) in timers.enumerated() {
            for value in 1...10 { timer.recordNanoseconds(Int64(index * 1_000 + value * 100_000)) }
        }
        let before = rig.agent.metrics.pointsRecorded
        benchmark.startMeasurement()
        rig.factory.flush()
        benchmark.stopMeasurement()
        let written = rig.agent.metrics.pointsRecorded - before
        precondition(written == 10_000, "wrote \(written) points")
        withExtendedLifetime((counters, timers)) {}
    }
}
