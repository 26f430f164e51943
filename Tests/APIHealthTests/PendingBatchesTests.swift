import Foundation
import LineProtocol
import Testing

@testable import APIHealth

/// The batching executor's record path: a line is encoded before the batching lock is taken, and only
/// its bytes (with the instant its series may use) go into the open batch under it.
@Suite struct PendingBatchesTests {
    private static func pending(precision: Precision = .ns) -> PendingBatches {
        PendingBatches(
            batching: APIHealthConfiguration.Batching(),
            encoder: LineEncoder(precision: precision),
            spool: nil
        )
    }

    private static func lines(_ pending: PendingBatches) -> [String] {
        String(decoding: pending.pendingBytes(), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private static let series = RequestSeries(
        try! SeriesKey(measurement: "apihealth_request", tags: [Point.Tag("host", "api.example.com")]),
        method: "GET",
        module: "probe",
        statusCode: 200,
        succeeds: true
    )
    private static let duration = try! FieldKey("duration_ms")
    private static let note = try! FieldKey("note")

    /// Points of one series at one instant are written at the next free ones: the line copied in is
    /// rewritten at its end only.
    @Test func pointsOfOneSeriesAtOneInstantAreMovedApart() {
        let pending = Self.pending()
        let point = Point(
            measurement: "queue",
            tags: [Point.Tag("name", "mail")],
            fields: [Point.Field("depth", .int(3))],
            timestamp: Timestamp(nanosecondsSinceEpoch: 1_000)
        )
        for _ in 0..<3 { #expect(pending.record(point, now: .zero)) }
        #expect(
            Self.lines(pending) == [
                "queue,name=mail depth=3i 1000", "queue,name=mail depth=3i 1001", "queue,name=mail depth=3i 1002",
            ]
        )
    }

    /// A series line at an instant its series used is moved on as well, and a line longer than the
    /// stack's room is recorded whole.
    @Test func seriesLinesAreMovedApartAndLongOnesKeptWhole() {
        let pending = Self.pending()
        let long = String(repeating: "x", count: 3_000)
        let timestamp = Timestamp(nanosecondsSinceEpoch: 5_000)
        #expect(pending.record(series: Self.series, timestamp: timestamp, now: .zero) { $0.add(Self.duration, 1.5) })
        #expect(pending.record(series: Self.series, timestamp: timestamp, now: .zero) { $0.add(Self.note, long) })
        #expect(
            Self.lines(pending) == [
                "apihealth_request,host=api.example.com duration_ms=1.5 5000",
                "apihealth_request,host=api.example.com note=\"\(long)\" 5001",
            ]
        )
    }

    /// At second precision a point may move one second at most: the third at one instant is dropped
    /// and counted, and nothing of it is left in the batch.
    @Test func aPointWithNoFreeInstantIsDroppedAndCounted() {
        let pending = Self.pending(precision: .s)
        let point = Point(
            measurement: "m",
            fields: [Point.Field("n", .int(1))],
            timestamp: Timestamp(seconds: 1_700_000_000)
        )
        #expect(pending.record(point, now: .zero))
        #expect(pending.record(point, now: .zero))
        #expect(!pending.record(point, now: .zero))
        #expect(Self.lines(pending) == ["m n=1i 1700000000", "m n=1i 1700000001"])
        #expect(pending.currentMetrics.pointsDropped == 1)
        #expect(pending.currentMetrics.pointsRecorded == 2)
    }

    /// A point that cannot be written is invalid while intake is open, and dropped (as any point
    /// would be) once it has closed.
    @Test func anInvalidPointIsCountedAsInvalidThenAsDroppedAfterClose() {
        let pending = Self.pending()
        let empty = Point(measurement: "m", fields: [])
        #expect(!pending.record(empty, now: .zero))
        #expect(pending.currentMetrics.pointsInvalid == 1)
        pending.close()
        #expect(!pending.record(empty, now: .zero))
        #expect(pending.currentMetrics.pointsInvalid == 1)
        #expect(pending.droppedAfterClose == 1)
    }

    /// The schema's field writer runs before the batching lock is taken: one that reads the batches
    /// (taking their lock) neither deadlocks nor sees its own line.
    @Test func theFieldWriterRunsWithTheBatchingLockFree() {
        let pending = Self.pending()
        var pendingWhileWriting: [Int] = []
        for second in 1...2 {
            let recorded = pending.record(
                series: Self.series,
                timestamp: Timestamp(seconds: Int64(second)),
                now: .zero
            ) { fields in
                pendingWhileWriting.append(pending.currentMetrics.pendingLines)
                fields.add(Self.duration, 2.0)
            }
            #expect(recorded)
        }
        #expect(pendingWhileWriting == [0, 1])
        #expect(pending.currentMetrics.pointsRecorded == 2)
    }
}
