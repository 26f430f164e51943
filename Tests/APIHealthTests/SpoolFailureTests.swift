import Foundation
import LineProtocol
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

#if canImport(Glibc)
import Glibc
#endif

/// The real file system, with failures injected on demand and every call recorded.
final class FailingFileSystem: SpoolFileSystem {
    struct Rules {
        /// Writes fail with ENOSPC after this many more bytes (a short write first).
        var bytesBeforeFull: Int?
        var failRenames = false
        var failTruncate = false
        /// Calls made, e.g. `open 00001.open.lp`, `fsync directory`.
        var calls: [String] = []
    }

    let rules = Locked(Rules())
    private let real = SystemFileSystem()

    private func log(_ call: String) { rules.withLock { $0.calls.append(call) } }

    func openat(_ directory: Int32, _ name: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
        log("open \(name)")
        return real.openat(directory, name, flags, mode)
    }

    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        let allowed = rules.withLock { rules -> Int? in
            guard let left = rules.bytesBeforeFull else { return nil }
            let count = min(left, bytes.count)
            rules.bytesBeforeFull = left - count
            return count
        }
        guard let allowed else { return real.write(descriptor, bytes) }
        if allowed == 0 {
            errno = ENOSPC
            return -1
        }
        return real.write(descriptor, UnsafeRawBufferPointer(rebasing: bytes[..<allowed]))
    }

    func ftruncate(_ descriptor: Int32, _ length: Int) -> Int32 {
        log("truncate \(length)")
        if rules.withLock({ $0.failTruncate }) {
            errno = EIO
            return -1
        }
        return real.ftruncate(descriptor, length)
    }

    func fsync(_ descriptor: Int32) -> Int32 {
        log(EntryStatus.of(descriptor: descriptor)?.isDirectory == true ? "fsync directory" : "fsync file")
        return real.fsync(descriptor)
    }

    func close(_ descriptor: Int32) -> Int32 { real.close(descriptor) }

    func renameat(_ directory: Int32, _ from: String, _ to: String) -> Int32 {
        log("rename \(from) \(to)")
        if rules.withLock({ $0.failRenames }) {
            errno = EIO
            return -1
        }
        return real.renameat(directory, from, to)
    }

    func unlinkat(_ directory: Int32, _ name: String) -> Int32 {
        log("unlink \(name)")
        return real.unlinkat(directory, name)
    }

    func mkdirat(_ directory: Int32, _ name: String, _ mode: mode_t) -> Int32 { real.mkdirat(directory, name, mode) }
}

private func point(_ index: Int) -> Point {
    Point(
        measurement: "m",
        fields: [Point.Field("n", .int(Int64(index)))],
        timestamp: Timestamp(nanosecondsSinceEpoch: Int64(index))
    )
}

private func makeStore(
    _ directory: URL,
    fileSystem: FailingFileSystem,
    fsync: Bool = false,
    batching: APIHealthConfiguration.Batching = APIHealthConfiguration.Batching()
) throws -> (PendingBatches, SpoolDirectory) {
    let spool = try SpoolDirectory(
        options: SpoolOptions(directory: directory, fsync: fsync),
        precision: .ns,
        fileSystem: fileSystem
    )
    return (PendingBatches(batching: batching, encoder: LineEncoder(precision: .ns), spool: spool), spool)
}

private func spoolText(_ directory: URL) throws -> String {
    let reader = try SpoolReader(directory: directory)
    var text = ""
    for name in try reader.segmentNames() {
        if case .bytes(let bytes) = try reader.bytes(ofSegment: name) { text += String(decoding: bytes, as: UTF8.self) }
    }
    return text
}

@Suite struct SpoolFailureTests {
    @Test func aFailedPartialWriteLeavesNoHalfLineAndIsNotAppendedTwice() throws {
        for failTruncate in [false, true] {
            let directory = temporaryDirectory("partial").appendingPathComponent("spool")
            let fileSystem = FailingFileSystem()
            let (pending, _) = try makeStore(directory, fileSystem: fileSystem)
            for index in 0..<3 { pending.record(point(index), now: .zero) }
            var logged: [String] = []
            pending.writeThrough { logged.append($0) }
            let before = try spoolText(directory)
            fileSystem.rules.withLock {
                $0.bytesBeforeFull = 7
                $0.failTruncate = failTruncate
            }
            for index in 3..<6 { pending.record(point(index), now: .zero) }
            pending.writeThrough { logged.append($0) }
            pending.writeThrough { logged.append($0) }
            #expect(pending.currentMetrics.spoolWriteErrors == 2)
            #expect(logged.count == 1, "the first failure is reported once")
            let afterFailure = try spoolText(directory)
            #expect(
                afterFailure == before || afterFailure.isEmpty,
                "no half line on disk: \(afterFailure.debugDescription)"
            )

            fileSystem.rules.withLock { $0.bytesBeforeFull = nil }
            pending.writeThrough { logged.append($0) }
            let expected = (0..<6).map { "m n=\($0)i \($0)\n" }.joined()
            #expect(try spoolText(directory) == expected, "each line once (truncate fails: \(failTruncate))")
        }
    }

    @Test func aSealThatCannotRenameIsCountedAndRetried() throws {
        let directory = temporaryDirectory("seal").appendingPathComponent("spool")
        let fileSystem = FailingFileSystem()
        let (pending, _) = try makeStore(directory, fileSystem: fileSystem)
        pending.record(point(1), now: .zero)
        pending.sealOpenBatch()
        fileSystem.rules.withLock { $0.failRenames = true }
        pending.writeThrough { _ in }
        #expect(pending.currentMetrics.spoolWriteErrors == 1)
        #expect(try SpoolReader(directory: directory).segmentNames().allSatisfy { $0.hasSuffix(".open.lp") })
        fileSystem.rules.withLock { $0.failRenames = false }
        pending.writeThrough { _ in }
        let names = try SpoolReader(directory: directory).segmentNames()
        #expect(names.count == 1 && !names[0].hasSuffix(".open.lp"), "\(names)")
    }

    @Test func fsyncCoversTheFileAndTheDirectory() throws {
        let directory = temporaryDirectory("fsync").appendingPathComponent("spool")
        let fileSystem = FailingFileSystem()
        let (pending, _) = try makeStore(directory, fileSystem: fileSystem, fsync: true)
        fileSystem.rules.withLock { $0.calls = [] }
        pending.record(point(1), now: .zero)
        pending.sealOpenBatch()
        pending.writeThrough { _ in }
        let calls = fileSystem.rules.withLock { $0.calls }
        let open = try #require(calls.firstIndex { $0.hasPrefix("open ") && $0.hasSuffix(".open.lp") })
        let rename = try #require(calls.firstIndex { $0.hasPrefix("rename ") })
        #expect(calls[open + 1] == "fsync directory", "the new file's entry is durable: \(calls)")
        #expect(calls[open + 2] == "fsync file", "\(calls)")
        #expect(calls.count > rename + 1 && calls[rename + 1] == "fsync directory", "the rename is durable: \(calls)")
    }

    @Test func aRejectedBatchIsCopiedBeforeItIsRemoved() throws {
        let directory = temporaryDirectory("reject").appendingPathComponent("spool")
        let fileSystem = FailingFileSystem()
        let (pending, _) = try makeStore(directory, fileSystem: fileSystem)
        pending.record(point(1), now: .zero)
        pending.sealOpenBatch()
        pending.writeThrough { _ in }
        guard
            case .send(let segment, _, _, _) = pending.next(now: .zero, openDeadline: nil, for: DestinationID(index: 0))
        else {
            Issue.record("nothing to send")
            return
        }
        fileSystem.rules.withLock { $0.failRenames = true }
        pending.reject(segment, reason: "HTTP 400: bad", refused: .all, for: DestinationID(index: 0))
        #expect(pending.currentMetrics.spoolWriteErrors == 1)
        #expect(pending.currentMetrics.pointsRejected == 1)
        #expect(
            try spoolText(directory) == "m n=1i 1\n",
            "the batch stays in the spool when its copy cannot be written"
        )
        #expect(try SpoolReader(directory: directory).rejected().isEmpty)

        fileSystem.rules.withLock { $0.failRenames = false }
        pending.record(point(2), now: .zero)
        pending.sealOpenBatch()
        pending.writeThrough { _ in }
        guard
            case .send(let second, _, _, _) = pending.next(now: .zero, openDeadline: nil, for: DestinationID(index: 0))
        else {
            Issue.record("nothing to send")
            return
        }
        pending.reject(second, reason: "HTTP 400: bad", refused: .all, for: DestinationID(index: 0))
        let calls = fileSystem.rules.withLock { $0.calls }
        let copied = try #require(calls.lastIndex { $0.hasPrefix("rename \(second).lp.tmp") })
        let removed = try #require(calls.lastIndex { $0 == "unlink \(second).lp" })
        #expect(copied < removed, "written first, then removed")
        #expect(try SpoolReader(directory: directory).rejected().map(\.name) == ["\(second).lp"])
    }

    @Test func pointsKeptNowhereAreCountedAtShutdown() async throws {
        var configuration = APIHealthConfiguration(serviceName: "lost")
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: .init(label: "lost"))
        for index in 0..<25 { agent.write(point(index)) }
        await agent.shutdown(deadline: .milliseconds(50))
        #expect(agent.metrics.pointsLost == 26, "25 points and the agent's own health point")

        let directory = temporaryDirectory("full").appendingPathComponent("spool")
        let fileSystem = FailingFileSystem()
        let (pending, _) = try makeStore(directory, fileSystem: fileSystem)
        for index in 0..<5 { pending.record(point(index), now: .zero) }
        pending.writeThrough { _ in }
        fileSystem.rules.withLock { $0.bytesBeforeFull = 0 }
        for index in 5..<12 { pending.record(point(index), now: .zero) }
        #expect(pending.releaseSpool() == 7, "the 7 points that never reached the disk")
        #expect(pending.currentMetrics.pointsLost == 7)
    }

    /// Shutdown lets go of the spool at once, not when the agent object goes: the next agent (an app's
    /// next start in the same process, a replacement service) opens the directory while the first is
    /// still alive, and the first writes nothing there after.
    @Test func anAgentThatHasShutDownGivesUpItsSpoolAtOnce() async throws {
        let directory = temporaryDirectory("released").appendingPathComponent("spool")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        var configuration = APIHealthConfiguration(serviceName: "released")
        configuration.spool = SpoolOptions(directory: directory)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // Learning a country keeps the spool directory beside the batches too.
        configuration.capture.countryHeader = "CloudFront-Viewer-Country"
        let first = try APIHealthAgent(configuration: configuration, logger: .init(label: "released"))
        for index in 0..<3 { first.write(point(index)) }
        first.start()
        await first.shutdown(deadline: .milliseconds(100))

        let second = try APIHealthAgent(configuration: configuration, logger: .init(label: "released"))
        #expect(second.pendingPoints().count(where: { $0.measurement == "m" }) == 3, "the first agent's points")

        // The first agent's spool refuses every write now; nothing it is asked to do reaches the files.
        let released = first.pending.worker.spool
        #expect(released?.isReleased == true)
        #expect(throws: SpoolError.self) {
            try released?.writeSealed("00000000000000000099", bytes: Array("m v=1i 1\n".utf8))
        }
        #expect(released?.keepLearnedCountry("BR") == false)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent(".country").path))
        await second.shutdown(deadline: .milliseconds(100))
        withExtendedLifetime(first) {}
    }

    @Test func sealedBatchesHoldOnlyTheirBytes() throws {
        var batching = APIHealthConfiguration.Batching()
        batching.maximumLines = 10
        let pending = PendingBatches(batching: batching, encoder: LineEncoder(precision: .ns), spool: nil)
        for index in 0..<200 { pending.record(point(index), now: .zero) }
        let content = pending.pendingBytes().count
        // A whole batch's buffer is 1 MiB + 64 KiB: one for the open batch and the spare ones kept for reuse.
        let buffers = (1 + BufferPool.spareLimit) * 1_120_000
        #expect(
            pending.reservedBytes < content + 4 * 1_024 + buffers,
            "only the open batch and the spare buffers keep room to grow"
        )
    }

    @Test func aBacklogOfSmallBatchesGoesOutInFewRequests() throws {
        let pending = PendingBatches(
            batching: APIHealthConfiguration.Batching(),
            encoder: LineEncoder(precision: .ns),
            spool: nil
        )
        for index in 0..<30 {
            pending.record(point(index), now: .zero)
            pending.sealOpenBatch()
        }
        guard
            case .send(let segment, _, let lines, _) = pending.next(
                now: .zero,
                openDeadline: nil,
                for: DestinationID(index: 0)
            )
        else {
            Issue.record("nothing to send")
            return
        }
        #expect(lines == 30)
        pending.acknowledge(segment, sentBytes: 0, compressedBytes: 0, for: DestinationID(index: 0))
        #expect(pending.isDrained)
    }

    @Test func restoredSegmentsAreCutWithinTheBatchLimits() throws {
        let directory = temporaryDirectory("restore")
        try Data().write(to: directory.appendingPathComponent(SpoolDirectory.markerName))
        for index in 1...30 {
            try Data("small n=\(index)i \(index)\n".utf8).write(
                to: directory.appendingPathComponent(String(format: "%020d.lp", index))
            )
        }
        let big = (0..<12_000).map { "big n=\($0)i \($0)\n" }.joined()
        try Data(big.utf8).write(to: directory.appendingPathComponent(String(format: "%020d.lp", 31)))
        let spool = try SpoolDirectory(options: SpoolOptions(directory: directory), precision: .ns)
        let pending = PendingBatches(
            batching: APIHealthConfiguration.Batching(),
            encoder: LineEncoder(precision: .ns),
            spool: spool
        )
        _ = try pending.restore(from: spool.reader())
        var sizes: [Int] = []
        var order: [String] = []
        while case .send(let segment, _, let lines, let lineBytes) = pending.next(
            now: .zero,
            openDeadline: nil,
            for: DestinationID(index: 0)
        ) {
            let body = try #require(pending.body(of: segment))
            let bytes = try Gzip.decompress(body)
            #expect(lines <= 5_000 && bytes.count <= 1 << 20 && bytes.count == lineBytes)
            sizes.append(lines)
            order += String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
            pending.acknowledge(segment, sentBytes: bytes.count, compressedBytes: 0, for: DestinationID(index: 0))
        }
        #expect(sizes == [5_000, 5_000, 2_030], "\(sizes)")
        #expect(
            order == (1...30).map { "small n=\($0)i \($0)" } + (0..<12_000).map { "big n=\($0)i \($0)" },
            "in order"
        )
        // The spool worker removes the files of delivered batches at its next round, off the lock.
        pending.writeThrough { _ in }
        #expect(
            try SpoolReader(directory: directory).segments().allSatisfy { $0.lines.isEmpty },
            "acknowledged batches leave the spool"
        )
    }
}
