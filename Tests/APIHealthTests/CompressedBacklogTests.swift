import Foundation
import LineProtocol
import TestSupport
import Testing

@_spi(Benchmarking) @testable import APIHealth

/// Sealed batches waiting to be sent are held as their gzip bodies (``PendingBatches/makeWaitingBodies()``):
/// every line still goes out once, in order, whatever happens to the batch next.
@Suite struct CompressedBacklogTests {
    private static func point(_ index: Int) -> Point {
        Point(
            measurement: "http_request",
            tags: [Point.Tag("host", "api.example.com"), Point.Tag("path", "/users/{id}")],
            fields: [Point.Field("duration_ms", .int(Int64(index % 97))), Point.Field("status", .int(200))],
            timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000 + Int64(index))
        )
    }

    private static func smallBatches(lines: Int = 5_000) -> APIHealthConfiguration.Batching {
        var batching = APIHealthConfiguration.Batching()
        batching.maximumLines = lines
        batching.maximumBytes = 16 * 1_024
        batching.maximumPendingBytes = 64 << 20
        return batching
    }

    /// Sends everything pending, head first, as the shipper does; returns the lines of each request
    /// and whether its body was made before it was sent.
    private static func sendAll(_ pending: PendingBatches) throws -> [(lines: [UInt8], madeAhead: Bool)] {
        var sent: [(lines: [UInt8], madeAhead: Bool)] = []
        while case .send(let segment, let kept, _, let lineBytes) = pending.next(
            now: .zero,
            openDeadline: nil,
            for: DestinationID(index: 0)
        ) {
            let body = try #require(kept ?? pending.body(of: segment))
            let lines = try Gzip.decompress(body)
            #expect(lines.count == lineBytes)
            sent.append((lines, kept != nil))
            pending.acknowledge(
                segment,
                sentBytes: lineBytes,
                compressedBytes: body.count,
                for: DestinationID(index: 0)
            )
        }
        return sent
    }

    @Test func aBacklogIsHeldAsGzipBodiesAndSentWhole() throws {
        let pending = PendingBatches(batching: Self.smallBatches(), encoder: LineEncoder(precision: .ns), spool: nil)
        for index in 0..<20_000 { pending.record(Self.point(index), now: .zero) }
        pending.sealOpenBatch()
        let lines = pending.pendingBytes()
        let held = pending.reservedBytes
        #expect(held >= lines.count)

        pending.makeWaitingBodies()
        #expect(pending.currentMetrics.pendingBytes == lines.count, "the cap and the metrics count lines, not bodies")
        #expect(pending.pendingBytes() == lines)
        let spareBuffers = BufferPool.spareLimit * (16 + 64) * 1_024
        #expect(
            pending.reservedBytes < lines.count / 4 + spareBuffers,
            "held \(pending.reservedBytes) bytes for \(lines.count) bytes of lines (\(held) before)"
        )

        let sent = try Self.sendAll(pending)
        #expect(sent.flatMap(\.lines) == lines, "every line once, in order")
        #expect(sent.count > 10)
        #expect(!sent[0].madeAhead, "the shipper makes the head's body as it sends it")
        #expect(sent.dropFirst().allSatisfy { $0.madeAhead })
        #expect(pending.isDrained && pending.currentMetrics.pointsWritten == 20_000)
    }

    @Test func linesStayInMemoryUntilTheSpoolHasThem() throws {
        let directory = temporaryDirectory("compressed").appendingPathComponent("spool")
        let spool = try SpoolDirectory(options: SpoolOptions(directory: directory), precision: .ns)
        let pending = PendingBatches(
            batching: Self.smallBatches(lines: 10),
            encoder: LineEncoder(precision: .ns),
            spool: spool
        )
        for index in 0..<35 { pending.record(Self.point(index), now: .zero) }
        let lines = pending.pendingBytes()

        // Bodies made before the lines reached the disk: the lines must still be written through.
        pending.makeWaitingBodies()
        pending.writeThrough { _ in }
        let reader = try SpoolReader(directory: directory)
        var onDisk: [UInt8] = []
        for name in try reader.segmentNames() {
            if case .bytes(let bytes) = try reader.bytes(ofSegment: name) { onDisk += bytes }
        }
        #expect(String(decoding: onDisk, as: UTF8.self) == String(decoding: lines, as: UTF8.self))
        let lost = pending.releaseSpool()
        #expect(lost == 0, "nothing pending is only in memory")
        #expect(pending.pendingBytes() == lines)
    }

    @Test func aBatchHeldAsItsBodySplitsAfterA413() throws {
        let pending = PendingBatches(
            batching: Self.smallBatches(lines: 100),
            encoder: LineEncoder(precision: .ns),
            spool: nil
        )
        for index in 0..<300 { pending.record(Self.point(index), now: .zero) }
        pending.sealOpenBatch()
        let lines = pending.pendingBytes()
        pending.makeWaitingBodies()
        guard case .send(let head, _, _, _) = pending.next(now: .zero, openDeadline: nil, for: DestinationID(index: 0))
        else {
            Issue.record("nothing to send")
            return
        }
        _ = try #require(pending.body(of: head))
        #expect(pending.split(head, for: DestinationID(index: 0)), "the server found the batch too large")

        let sent = try Self.sendAll(pending)
        #expect(sent.map { $0.lines.split(separator: UInt8(ascii: "\n")).count } == [50, 50, 100, 100])
        #expect(sent.flatMap(\.lines) == lines)
    }

    @Test func smallBatchesHeldAsBodiesAreStillJoinedIntoFewRequests() throws {
        let pending = PendingBatches(batching: Self.smallBatches(), encoder: LineEncoder(precision: .ns), spool: nil)
        for index in 0..<30 {
            pending.record(Self.point(index), now: .zero)
            pending.sealOpenBatch()
        }
        let lines = pending.pendingBytes()
        pending.makeWaitingBodies()
        let sent = try Self.sendAll(pending)
        #expect(sent.count == 1)
        #expect(sent.flatMap(\.lines) == lines)
    }
}
