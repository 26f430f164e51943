import Foundation
import LineProtocol
import TestSupport
import Testing

@testable import APIHealthRelay
@_spi(Benchmarking) @_spi(Package) import APIHealth

/// Lines of the schema's shape with everything line protocol finds hard in their tag values and floats
/// (delimiters, quotes, backslashes, control characters, line breaks, non-ASCII, long values), and lines
/// broken byte by byte, through the real relay: every write answered 204 or 400, and exactly the lines it
/// took stored, in InfluxDB 1.x and VictoriaMetrics alike.
@Suite struct HostileCorpusTests {
    static let alphabet: [String] = [
        ",", "=", " ", "\"", "\\", "\\\\", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1B}", "\u{7F}", "#", "_", "é",
        "e\u{301}", "日本", "🚀", "'", "a", "z", "0", "-", ".", "/", "{", "}",
    ]

    static func text(_ random: inout SeededGenerator, maxLength: Int) -> String {
        var result = "k"
        for _ in 0..<Int.random(in: 0...maxLength, using: &random) {
            result += alphabet.randomElement(using: &random)!
        }
        return result
    }

    /// The lines of `body` that hold a point, split as the relay splits them.
    static func linesHoldingPoints(_ body: [UInt8]) -> Int {
        body.withUnsafeBufferPointer { bytes in
            LineSplitter(bytes).filter { RelayIntake.holdsPoint(bytes, $0.range) }.count
        }
    }

    /// The `M` of a partial write's "dropped=N of M lines".
    static func lineCount(_ reply: HTTP.Reply) -> Int {
        guard let dropped = reply.text.range(of: "dropped="),
            let range = reply.text.range(of: " of ", range: dropped.upperBound..<reply.text.endIndex)
        else { return 0 }
        return Int(reply.text[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }

    @Test func hostileLinesAreTakenOrRefusedAndWhatIsTakenIsStoredOnce() async throws {
        let seed =
            ProcessInfo.processInfo.environment["APIHEALTH_HOSTILE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(state: seed)
        let influx = try await InfluxDB1.freshDatabase("relay_corpus")
        let victoria = try VictoriaMetrics()
        let invalidBefore = try await victoria.invalidRows()
        let service = "relay_corpus_\(UInt32.random(in: 0...UInt32.max))"
        let relay = try RelayProcess(
            keys: "k-corpus=\(service)",
            influx: influx,
            victoria: victoria,
            settings: ["APIHEALTH_RELAY_NEW_SERIES_PER_HOUR": "1000000"]
        )
        try await relay.start()
        let encoder = LineEncoder(precision: .ns)
        // A millisecond apart: VictoriaMetrics keeps milliseconds.
        let start = Timestamp.systemNow().nanosecondsSinceEpoch - 60_000_000_000
        var sent = 0
        var taken = 0
        for batch in 0..<10 {
            var body: [UInt8] = []
            var lines = 0
            for index in 0..<500 {
                let tags = [
                    Point.Tag("host", Self.text(&random, maxLength: 6)),
                    Point.Tag(
                        "path",
                        Self.text(&random, maxLength: Int.random(in: 0..<10, using: &random) == 0 ? 300 : 8)
                    ),
                    Point.Tag("module", Self.text(&random, maxLength: 4)),
                    Point.Tag("service", service),
                ]
                let float = [
                    0.1, -0.0, 1e300, .leastNonzeroMagnitude, Double(Int.random(in: 0...1_000, using: &random)),
                ]
                .randomElement(using: &random)!
                let point = Point(
                    measurement: PointSchema.Measurement.requestInterval,
                    tags: tags,
                    fields: [Point.Field("count", .int(1)), Point.Field("duration_ms_sum", .float(float))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: start + Int64(batch * 500 + index) * 1_000_000)
                )
                var line: [UInt8] = []
                guard (try? encoder.encode(point, into: &line)) != nil else { continue }
                // One line in five broken: a byte of it replaced by a delimiter, a quote or a line break.
                if Int.random(in: 0..<5, using: &random) == 0 {
                    let position = Int.random(in: 0..<(line.count - 1), using: &random)
                    line[position] = Array(",= \"\\\n".utf8).randomElement(using: &random)!
                }
                body += line
                if line.last != UInt8(ascii: "\n") { body.append(UInt8(ascii: "\n")) }
                lines += 1
            }
            let reply = try await relay.write(
                String(decoding: body, as: UTF8.self),
                key: "k-corpus",
                client: "192.0.2.\(batch)"
            )
            #expect(
                reply.status == 204 || reply.status == 400,
                "seed \(seed): \(reply.status) \(reply.text.prefix(300))"
            )
            // A broken line can be two (a line break) or join the next (an opened quote): the relay's count
            // of lines is the one to compare with, as its 400 gives it ("dropped=N of M lines").
            let seen = reply.status == 204 ? Self.linesHoldingPoints(body) : Self.lineCount(reply)
            sent += seen
            taken += reply.status == 204 ? seen : seen - HostileWritersTests.dropped(reply)
        }
        #expect(taken > sent / 4 && taken < sent, "seed \(seed): \(taken) of \(sent) taken")
        print(
            "hostile corpus through the relay: \(taken) of \(sent) lines taken, seed \(seed) (APIHEALTH_HOSTILE_SEED replays it)"
        )
        let stopped = relay.stop()
        #expect(stopped?.status == 0)
        let rows = try await influx.query(
            "SELECT sum(\"count\") FROM \"\(PointSchema.Measurement.requestInterval)\" WHERE \"service\" = '\(service)'"
        )
        #expect((rows.first?.rows.first?["sum"] as? NSNumber)?.intValue == taken, "seed \(seed)")
        let rejected = try await influx.query(
            "SELECT last(\"points_rejected\") FROM \"apihealth_agent\" WHERE \"service\" = 'apihealth-relay'"
        )
        #expect(
            (rejected.first?.rows.first?["last"] as? NSNumber)?.intValue ?? 0 == 0,
            "seed \(seed): InfluxDB refused lines the relay took"
        )
        var stored = 0
        let storedAll = try await waitUntil {
            stored = Int(
                try await victoria.export(namePattern: "\(PointSchema.Measurement.requestInterval)_count")
                    .filter { $0.labels["service"] == service }.reduce(0) { $0 + $1.values.reduce(0, +) }
            )
            return stored == taken
        }
        #expect(storedAll, "seed \(seed): \(stored) stored in VictoriaMetrics, \(taken) taken")
        #expect(try await victoria.invalidRows() == invalidBefore, "seed \(seed)")
    }
}
