@_spi(Benchmarking) import APIHealth
import Benchmark
import BenchmarkTolerances
import LineProtocol

/// A typical API-health point: 6 tags, 8 fields (3 floats, 3 integers, 1 string, 1 bool), ns timestamp.
let tags = [
    Point.Tag("host", "api.example.com"), Point.Tag("path", "/users/{id}/orders"), Point.Tag("method", "GET"),
    Point.Tag("module", "checkout"), Point.Tag("status", "200"), Point.Tag("status_class", "2xx"),
]
let fields = [
    Point.Field("duration_ms", .float(12.345678)), Point.Field("ttfb_ms", .float(8.25)),
    Point.Field("transfer_ms", .float(4.095678)), Point.Field("status_code", .int(200)),
    Point.Field("request_bytes", .int(312)), Point.Field("response_bytes", .int(5_120)),
    Point.Field("correlation_id", .string("7f9c2ba4-e88f-4c1b-9d21-3b6f0c9a1e55")), Point.Field("success", .bool(true)),
]
let timestamp = Timestamp(nanosecondsSinceEpoch: 1_700_000_000_123_456_789)
let point = Point(measurement: "apihealth_request", tags: tags, fields: fields, timestamp: timestamp)

func batch(lines count: Int) -> [UInt8] {
    var buffer: [UInt8] = []
    var varied = point
    for index in 0..<count {
        varied.fields[0] = Point.Field("duration_ms", .float(Double(index % 5_000) / 7))
        varied.fields[5] = Point.Field("response_bytes", .int(Int64(index * 37 % 100_000)))
        varied.timestamp = Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000 + Int64(index) * 1_000_003)
        try! LineEncoder().encode(varied, into: &buffer)
    }
    return buffer
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        maxDuration: .seconds(3),
        maxIterations: 1_000_000,
        thresholds: tolerances
    )

    Benchmark("encode point (reused buffer)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let encoder = LineEncoder(precision: .ns)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4_096)
        for _ in benchmark.scaledIterations {
            buffer.removeAll(keepingCapacity: true)
            try encoder.encode(point, into: &buffer)
            blackHole(buffer.count)
        }
    }

    Benchmark("encode point (prerendered series key)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let encoder = LineEncoder(precision: .ns)
        let series = try SeriesKey(measurement: "apihealth_request", tags: tags)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4_096)
        for _ in benchmark.scaledIterations {
            buffer.removeAll(keepingCapacity: true)
            try encoder.encode(fields: fields, timestamp: timestamp, series: series, into: &buffer)
            blackHole(buffer.count)
        }
    }

    Benchmark(
        "encode point (prerendered series key and field keys, FieldWriter)",
        configuration: .init(scalingFactor: .kilo)
    ) {
        benchmark in
        let encoder = LineEncoder(precision: .ns)
        let series = try SeriesKey(measurement: "apihealth_request", tags: tags)
        // Kept apart, as a caller keeps its keys (reading each from an array would copy it).
        let duration = try FieldKey("duration_ms")
        let ttfb = try FieldKey("ttfb_ms")
        let transfer = try FieldKey("transfer_ms")
        let status = try FieldKey("status_code")
        let requestBytes = try FieldKey("request_bytes")
        let responseBytes = try FieldKey("response_bytes")
        let correlation = try FieldKey("correlation_id")
        let success = try FieldKey("success")
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4_096)
        var expected: [UInt8] = []
        try encoder.encode(fields: fields, timestamp: timestamp, series: series, into: &expected)
        for _ in benchmark.scaledIterations {
            buffer.removeAll(keepingCapacity: true)
            try encoder.encode(series: series, timestamp: timestamp, into: &buffer) { writer in
                writer.add(duration, millionths: 12_345_678)
                writer.add(ttfb, millionths: 8_250_000)
                writer.add(transfer, millionths: 4_095_678)
                writer.add(status, Int64(200))
                writer.add(requestBytes, Int64(312))
                writer.add(responseBytes, Int64(5_120))
                writer.add(correlation, "7f9c2ba4-e88f-4c1b-9d21-3b6f0c9a1e55")
                writer.add(success, true)
            }
            blackHole(buffer.count)
        }
        precondition(buffer == expected, "the FieldWriter line differs from the fields path's")
    }

    Benchmark("parse line", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var line: [UInt8] = []
        try LineEncoder().encode(point, into: &line)
        line.removeLast()
        let parser = LineParser()
        for _ in benchmark.scaledIterations {
            blackHole(try parser.parseLine(line))
        }
    }

    let lines = batch(lines: 5_000)
    for implementation in Gzip.Implementation.allCases {
        for level in [1, 6] {
            var compressed: [UInt8] = []
            try! Gzip.compress(lines, level: level, using: implementation, into: &compressed)
            // Where the system has no libdeflate, Gzip falls back to zlib: say so rather than mislabel it.
            let used =
                implementation == .libdeflate && Gzip.implementation == .zlib
                ? "zlib (no libdeflate here)" : implementation.rawValue
            precondition(try! Gzip.decompress(compressed) == lines, "\(used) level \(level) does not round-trip")
            let ratio = Double(lines.count) / Double(compressed.count)
            Benchmark(
                "gzip 5000-line batch, \(used) level \(level) (\(lines.count) B in, ratio \(Int(ratio * 10) / 10).\(Int(ratio * 10) % 10))",
                configuration: .init(metrics: [.wallClock, .cpuTotal, .throughput, .mallocCountTotal])
            ) { benchmark in
                var output: [UInt8] = []
                output.reserveCapacity(lines.count)
                // Gzip's memory kept from batch to batch, as the agent's loops keep it.
                let workspace = GzipWorkspace()
                for _ in benchmark.scaledIterations {
                    output.removeAll(keepingCapacity: true)
                    try Gzip.compress(lines, level: level, using: implementation, into: &output, keeping: workspace)
                    blackHole(output.count)
                }
            }
        }
    }
}
