// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the main build stays light. Run from this folder:
//   swift package --allow-writing-to-package-directory benchmark
let package = Package(
    name: "APIHealthBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "APIHealth", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "LineProtocolBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LineProtocol", package: "APIHealth"),
                .product(name: "APIHealth", package: "APIHealth"),
            ],
            path: "Benchmarks/LineProtocolBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
