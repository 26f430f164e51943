// swift-tools-version:6.0
import PackageDescription

let strictSwift6: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "APIHealth",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "APIHealth", targets: ["APIHealth"]),
        .library(name: "LineProtocol", targets: ["LineProtocol"]),
        // Capture for AsyncHTTPClient requests: only services that use AsyncHTTPClient build it.
        .library(name: "APIHealthAsyncHTTPClient", targets: ["APIHealthAsyncHTTPClient"]),
        .executable(name: "influx-tail", targets: ["influx-tail"]),
        .executable(name: "apihealth-demo", targets: ["apihealth-demo"]),
        // For testing code that uses the agent (as ServiceLifecycleTestKit is for lifecycle): a loopback
        // HTTP server to stand for an API or a write endpoint. The demo, the tests and the benchmarks use it.
        .library(name: "APIHealthTestKit", targets: ["APIHealthTestKit"]),
        // swift-metrics backend: every Counter, Meter, Recorder and Timer, shipped through the agent.
        .library(name: "APIHealthMetrics", targets: ["APIHealthMetrics"]),
        // W3C trace headers from swift-distributed-tracing's context for requests to first-party hosts:
        // only services that propagate traces build it and its dependencies.
        .library(name: "APIHealthTracing", targets: ["APIHealthTracing"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", from: "1.0.0"),
        // Only for `swift package generate-documentation` (scripts/docs): a command plugin, which no target
        // depends on, so building the library never builds it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        .target(name: "LineProtocol", swiftSettings: strictSwift6),
        .systemLibrary(
            name: "CZlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .target(
            name: "APIHealth",
            dependencies: [
                "LineProtocol",
                "CZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            // Apple's privacy manifest: the required-reason APIs the agent uses (file timestamps, for the
            // spool) and the data it collects, declared for the app that links it (PrivacyManifestTests).
            resources: [.process("PrivacyInfo.xcprivacy")],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "APIHealthAsyncHTTPClient",
            dependencies: [
                "APIHealth",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // AsyncHTTPClient depends on it already: to leave trace headers to a client's own tracer.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "APIHealthTracing",
            dependencies: [
                "APIHealth",
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "APIHealthMetrics",
            dependencies: [
                "APIHealth", "LineProtocol",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
        // The per-endpoint summary both executables print (influx-tail --summary, the demo's closing
        // table): aggregation, table and JSON rendering, and the spool follower.
        .target(
            name: "APIHealthSummary",
            dependencies: ["LineProtocol", "APIHealth"],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "influx-tail",
            dependencies: [
                "LineProtocol", "APIHealth", "APIHealthSummary",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "apihealth-demo",
            dependencies: [
                "APIHealth", "APIHealthAsyncHTTPClient", "APIHealthMetrics", "APIHealthSummary", "APIHealthTestKit",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "APIHealthTestKit",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "TestSupport",
            dependencies: [
                "LineProtocol", "APIHealth", "APIHealthTestKit",
            ],
            path: "Tests/TestSupport",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "LineProtocolTests",
            dependencies: ["LineProtocol", "TestSupport"],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "spool-writer",
            dependencies: ["LineProtocol", "APIHealth", .product(name: "Logging", package: "swift-log")],
            path: "Tests/SpoolWriter",
            swiftSettings: strictSwift6
        ),
        // The README's code as a service, run by ReadmeTests.
        .executableTarget(
            name: "readme-example",
            dependencies: [
                "APIHealth", "APIHealthAsyncHTTPClient", "APIHealthMetrics", "APIHealthTracing",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/ReadmeExample",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "capture-probe",
            dependencies: [
                "APIHealth", "APIHealthAsyncHTTPClient", "APIHealthMetrics", "APIHealthTestKit", "LineProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/CaptureProbe",
            swiftSettings: strictSwift6
        ),
        // How long record() keeps a host thread in the situations that used to stall it
        // (scripts/record-stall).
        // An app's installs measured (scripts/app-installs): many into the real servers, and one's hourly budget.
        .executableTarget(
            name: "app-installs",
            dependencies: [
                "APIHealth", "APIHealthTestKit", "TestSupport", "LineProtocol",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/AppInstalls",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "record-stall",
            dependencies: ["APIHealth", "APIHealthTestKit", .product(name: "Logging", package: "swift-log")],
            path: "Tests/RecordStall",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "InfluxTailTests",
            dependencies: ["LineProtocol", "APIHealth", "APIHealthSummary", "TestSupport", "APIHealthTestKit"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthTests",
            dependencies: ["LineProtocol", "APIHealth", "TestSupport", "APIHealthTestKit"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthAsyncHTTPClientTests",
            dependencies: [
                "APIHealth", "APIHealthAsyncHTTPClient", "TestSupport", "APIHealthTestKit", "LineProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthTracingTests",
            dependencies: [
                "APIHealth", "APIHealthTracing", "APIHealthAsyncHTTPClient", "TestSupport", "APIHealthTestKit",
                "LineProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthMetricsTests",
            dependencies: [
                "APIHealth", "APIHealthMetrics", "TestSupport",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "LineProtocol", "APIHealth", "APIHealthMetrics", "TestSupport", "APIHealthTestKit",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
    ]
)

// Vapor's `req.client` and `app.client` recorded, the agent run with the application's lifecycle: a product
// of its own, so only Vapor applications build it and Vapor. Vapor builds slowly on 2 cores: its tests are a
// target of their own, the only one (with readme-vapor-example) that depends on it, and a build that runs
// no Vapor test leaves all three out with APIHEALTH_NO_VAPOR=1 (the sanitizer builds of
// scripts/test-sanitizers, so that CI builds Vapor once).
if Context.environment["APIHEALTH_NO_VAPOR"] == nil {
    package.dependencies.append(.package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"))
    package.products.append(.library(name: "APIHealthVapor", targets: ["APIHealthVapor"]))
    // The relay installs write to instead of the database: it holds the database's token, checks every line
    // against the schema and forwards through the agent's own shipping (see "A relay for app installs").
    package.products.append(.executable(name: "apihealth-relay", targets: ["apihealth-relay"]))
    package.targets += [
        .target(
            name: "APIHealthVapor",
            dependencies: [
                "APIHealth", "APIHealthAsyncHTTPClient",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthVaporTests",
            dependencies: [
                "APIHealth", "APIHealthVapor", "TestSupport", "APIHealthTestKit", "LineProtocol",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift6
        ),
        // The relay's intake, schema check, limits and keys: plain values and one intake, tested without sockets.
        .target(
            name: "APIHealthRelay",
            dependencies: [
                "APIHealth", "LineProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
        // Vapor's HTTP server in front of the intake, run with the agent in one service group.
        .executableTarget(
            name: "apihealth-relay",
            dependencies: [
                "APIHealth", "APIHealthRelay",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
        // The relay's instructions per line, counted by callgrind (scripts/callgrind-relay): no Vapor, no socket.
        .executableTarget(
            name: "relay-probe",
            dependencies: [
                "APIHealth", "APIHealthRelay", "LineProtocol", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/RelayProbe",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "APIHealthRelayTests",
            dependencies: [
                "APIHealth", "APIHealthRelay", "LineProtocol", "TestSupport", "APIHealthTestKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift6
        ),
        // The README's Vapor block as a Vapor application, run by ReadmeTests: apart from readme-example so
        // that the README's service without Vapor stays one (Vapor is built for APIHealthVaporTests anyway).
        .executableTarget(
            name: "readme-vapor-example",
            dependencies: [
                "APIHealth", "APIHealthVapor", "APIHealthMetrics",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/ReadmeVaporExample",
            swiftSettings: strictSwift6
        ),
    ]
}

// The AddressSanitizer run of scripts/test-sanitizers needs only the core library's tests: with
// APIHEALTH_CORE_ONLY=1 the manifest holds just those targets, so that second build of the package
// leaves out AsyncHTTPClient and its TLS library, the metrics, tracing and integration targets.
if Context.environment["APIHEALTH_CORE_ONLY"] != nil {
    let core: Set<String> = [
        "LineProtocol", "CZlib", "APIHealth", "APIHealthTestKit", "TestSupport",
        "LineProtocolTests", "APIHealthTests",
    ]
    package.targets = package.targets.filter { core.contains($0.name) }
    package.products = package.products.filter { ["APIHealth", "LineProtocol", "APIHealthTestKit"].contains($0.name) }
}
