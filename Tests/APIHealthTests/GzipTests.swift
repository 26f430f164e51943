@_spi(Benchmarking) import APIHealth
import Foundation
import LineProtocol
import TestSupport
import Testing

@Suite struct GzipTests {
    static func sampleLines(_ count: Int) throws -> [UInt8] {
        var lines: [UInt8] = []
        for index in 0..<count {
            try LineEncoder().encode(
                Point(
                    measurement: "apihealth_request",
                    tags: ["host": "api\(index % 7).example.com", "status": "200"],
                    fields: ["duration_ms": .float(Double(index) / 7), "bytes": .uint(UInt64(index))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000 + Int64(index))
                ),
                into: &lines
            )
        }
        return lines
    }

    /// The test script installs libdeflate (and says so): then batches must be compressed by it.
    @Test func libdeflateIsUsedWhereTheSystemHasIt() {
        if ProcessInfo.processInfo.environment["APIHEALTH_EXPECT_LIBDEFLATE"] == "1" {
            #expect(Gzip.implementation == .libdeflate, "libdeflate is installed but was not loaded")
        }
        #expect(Gzip.Implementation.allCases.contains(Gzip.implementation))
    }

    @Test(arguments: [0, 1, 6, 9], Gzip.Implementation.allCases)
    func systemGunzipDecodesEveryLevel(level: Int, implementation: Gzip.Implementation) throws {
        let input = try Self.sampleLines(2_000)
        var compressed: [UInt8] = []
        try Gzip.compress(input, level: level, using: implementation, into: &compressed)
        #expect(compressed.starts(with: [0x1F, 0x8B, 0x08]), "an RFC 1952 member starts with its magic and deflate")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("apihealth-\(UUID()).gz")
        try Data(compressed).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let gunzip = Process()
        gunzip.executableURL = URL(fileURLWithPath: "/bin/sh")
        gunzip.arguments = ["-c", "gunzip -c '\(file.path)'"]
        let output = Pipe()
        gunzip.standardOutput = output
        try gunzip.run()
        let decoded = output.fileHandleForReading.readDataToEndOfFile()
        gunzip.waitUntilExit()
        #expect(gunzip.terminationStatus == 0)
        #expect(Array(decoded) == input)
        #expect(try Gzip.decompress(compressed) == input)
        if level > 0 { #expect(compressed.count < input.count / 4) }
    }

    /// Output that does not compress (and level 0) takes zlib several output chunks; what the output
    /// held before stays in front of the member.
    @Test(arguments: [0, 1, 9], Gzip.Implementation.allCases)
    func compressAppendsAfterTheOutputsBytes(level: Int, implementation: Gzip.Implementation) throws {
        var generator = SystemRandomNumberGenerator()
        let input = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var output: [UInt8] = [1, 2, 3]
        try Gzip.compress(input, level: level, using: implementation, into: &output)
        #expect(output.prefix(3) == [1, 2, 3])
        #expect(output.count > input.count)
        #expect(try Gzip.decompress(Array(output.dropFirst(3))) == input)
    }

    /// A loop's kept workspace serves one compression after another, at any level and any size (output
    /// past the kept buffer's bound goes to memory of its own), with the same bytes as a fresh one.
    @Test func aKeptWorkspaceCompressesAsAFreshOneAcrossLevelsAndSizes() throws {
        let workspace = GzipWorkspace()
        let small = try Self.sampleLines(50)
        let large = try Self.sampleLines(60_000)
        // Random bytes barely compress: its output is larger than the buffer a workspace keeps (4 MiB).
        var random = SystemRandomNumberGenerator()
        let incompressible = (0..<(5 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }
        for (input, level) in [(small, 1), (large, 1), (small, 6), (incompressible, 1), (small, 1), (large, 9)] {
            var kept: [UInt8] = []
            try Gzip.compress(input, level: level, into: &kept, keeping: workspace)
            var fresh: [UInt8] = []
            try Gzip.compress(input, level: level, into: &fresh)
            #expect(kept == fresh, "level \(level), \(input.count) bytes")
            #expect(try Gzip.decompress(kept) == input)
        }
    }

    @Test func decompressReadsConcatenatedMembersAndRefusesTruncation() throws {
        let first = Array("first\n".utf8)
        let second = Array("second\n".utf8)
        let joined = try Gzip.compress(first) + Gzip.compress(second, level: 1)
        #expect(try Gzip.decompress(joined) == first + second)
        let cut = Array(try Gzip.compress(first).dropLast(4))
        #expect(throws: Gzip.Failure.self) { try Gzip.decompress(cut) }
    }
}
