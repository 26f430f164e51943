import Benchmark

/// How far a run may be from the thresholds recorded in Benchmarks/Thresholds before
/// `scripts/benchmark --check` fails; only the p90 is compared with them. On the project's shared 2-core
/// machine, checks run right after recording moved times and throughput by up to half, the growth of
/// peak memory by up to 90 %, and allocation counts by a few (the harness's own). So: times and
/// throughput 60 % (a slowdown of 2× is caught, the machine's drift is not), peak memory 25 %, its
/// growth 150 %, allocation counts 15 % (one allocation more per line recorded is thousands more per
/// run). A metric left out here would be compared strictly.
public var tolerances: [BenchmarkMetric: BenchmarkThresholds] {
    [
        .wallClock: .init(relative: [.p90: 60]),
        .cpuTotal: .init(relative: [.p90: 60]),
        .throughput: .init(relative: [.p90: 60]),
        .peakMemoryResident: .init(relative: [.p90: 25]),
        .peakMemoryResidentDelta: .init(relative: [.p90: 150]),
        .mallocCountTotal: .init(relative: [.p90: 15]),
    ]
}
