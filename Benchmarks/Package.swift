// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the main build stays light. Run from this folder:
//   swift package --allow-writing-to-package-directory benchmark
// The pipeline benchmark needs a VictoriaMetrics (APIHEALTH_BENCH_VICTORIA_URL), the influx-tail ones a
// release build of influx-tail (INFLUX_TAIL_BIN) and the memory one of record-stall (RECORD_STALL_BIN):
// scripts/benchmark sets them up.
let package = Package(
    name: "APIHealthBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "APIHealth", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
    ],
    targets: [
        // The tolerances every suite compares its run with (scripts/benchmark --check).
        .target(
            name: "BenchmarkTolerances",
            dependencies: [.product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/BenchmarkTolerances"
        ),
        .executableTarget(
            name: "LineProtocolBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkTolerances",
                .product(name: "LineProtocol", package: "APIHealth"),
                .product(name: "APIHealth", package: "APIHealth"),
            ],
            path: "Benchmarks/LineProtocolBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "AgentBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkTolerances",
                .product(name: "LineProtocol", package: "APIHealth"),
                .product(name: "APIHealth", package: "APIHealth"),
                .product(name: "APIHealthTestKit", package: "APIHealth"),
                .product(name: "APIHealthAsyncHTTPClient", package: "APIHealth"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/AgentBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "MetricsBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkTolerances",
                .product(name: "LineProtocol", package: "APIHealth"),
                .product(name: "APIHealth", package: "APIHealth"),
                .product(name: "APIHealthMetrics", package: "APIHealth"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/MetricsBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // A recorded `req.client` call beside the same call unrecorded (builds Vapor: run it with --target).
        .executableTarget(
            name: "VaporBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkTolerances",
                .product(name: "APIHealth", package: "APIHealth"),
                .product(name: "APIHealthVapor", package: "APIHealth"),
                .product(name: "APIHealthTestKit", package: "APIHealth"),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/VaporBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
