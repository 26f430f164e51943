import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// Writes a spool with a real agent (no destination: everything stays pending).
func writeSpool(_ directory: URL, requests: Int, extra: [Point] = []) async throws {
    var configuration = APIHealthConfiguration(serviceName: "tail-tests")
    configuration.spool = SpoolOptions(directory: directory)
    configuration.selfMetricsInterval = noPeriodicHealthPoint
    configuration.batching.maximumLines = 100
    // Request points only: how many interval points there are would depend on the interval ends passed.
    configuration.aggregation = nil
    configuration.capture.rawPoints = .all
    let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "tail"))
    agent.start()
    let start = Date(timeIntervalSince1970: 1_763_800_000)
    for index in 0..<requests {
        agent.record(
            RequestSample(
                method: "GET",
                url: URL(string: "https://api\(index % 2).example.com/users/\(index)")!,
                module: index % 3 == 0 ? "payments" : "search",
                startedAt: start.addingTimeInterval(Double(index)),
                duration: .milliseconds(10 + index),
                statusCode: index % 5 == 0 ? 500 : 200
            )
        )
    }
    for point in extra { agent.write(point) }
    await agent.shutdown(deadline: .seconds(60))
}

@Suite struct InfluxTailTests {
    @Test func printsPendingLinesOldestFirstExactlyAsTheyWillBeSent() async throws {
        let spool = temporaryDirectory("tail")
        try await writeSpool(spool, requests: 250)
        let run = try await Child.run("influx-tail", ["--spool", spool.path])
        #expect(run.status == 0, "\(run.stderr)")
        let printed = run.stdout.split(separator: "\n").map(String.init)
        let fileBytes = try SpoolReader(directory: spool).segments().flatMap { $0.lines }.map {
            String(decoding: $0, as: UTF8.self)
        }
        let requests = printed.filter { $0.hasPrefix("apihealth_request,") }
        #expect(requests.count == 250)
        #expect(printed == fileBytes)
        let times = try requests.map { try #require(LineParser().parseLine(Array($0.utf8))?.timestamp) }
        #expect(times == times.sorted(), "oldest first")

        let last = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "-n", "3", "--measurement", "apihealth_request"]
        )
        #expect(last.stdout.split(separator: "\n").map(String.init) == Array(requests.suffix(3)))
    }

    @Test func filtersTableAndJSONFormats() async throws {
        let spool = temporaryDirectory("tail")
        try await writeSpool(spool, requests: 30)
        let filtered = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--where", "module=payments", "--where", "status=500"]
        )
        let lines = filtered.stdout.split(separator: "\n")
        #expect(lines.count == 2, "indices 0 and 15")
        #expect(lines.allSatisfy { $0.contains("module=payments") && $0.contains("status=500") })

        let table = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--format", "table", "--measurement", "apihealth_request", "-n", "2"]
        )
        let rows = table.stdout.split(separator: "\n")
        #expect(rows.count == 2)
        #expect(rows[0].hasPrefix("2025-11-22T08:27:08.000Z  apihealth_request  host=api0.example.com"))
        #expect(
            rows[0].contains("duration_ms=38.0") && rows[0].contains("status_code=200i")
                && !rows[0].contains("\u{1B}["),
            "no colours off a terminal"
        )

        let json = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--format", "json", "--measurement", "apihealth_request"]
        )
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 30)
        let first = try #require(objects.first)
        #expect((first["tags"] as? [String: String])?["path"] == "/users/{id}")
        #expect(((first["fields"] as? [String: Any])?["duration_ms"] as? NSNumber)?.doubleValue == 10)
        #expect((first["types"] as? [String: String])?["response_bytes"] == "unsigned")
        #expect((first["timestamp_ns"] as? NSNumber)?.int64Value == 1_763_800_000_000_000_000)
    }

    @Test func statsAndRejectedBatches() async throws {
        let spool = temporaryDirectory("tail")
        try await writeSpool(spool, requests: 20)
        let fault = try await FaultServer.start { _, _ in .text(400, "unable to parse: bad line") }
        var configuration = APIHealthConfiguration(
            serviceName: "tail-tests",
            destination: InfluxDestination(url: fault.url, api: .v2(organization: "o", bucket: "b"))
        )
        configuration.spool = SpoolOptions(directory: spool)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "tail"))
        agent.start()
        agent.write(Point(measurement: "other", fields: ["v": 1]))
        #expect(await waitUntil { agent.metrics.pointsRejected >= 21 })
        // Generous: shutdown sends the agent's last health point (rejected too) and returns once it has.
        await agent.shutdown(deadline: .seconds(60))
        await fault.shutdown()
        let stats = try await Child.run("influx-tail", ["--spool", spool.path, "--stats", "--format", "json"])
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        #expect(summary["pending_lines"] as? Int == 0)
        #expect(summary["rejected_lines"] as? Int == 23, "20 requests, 1 other point, 2 agent health points")
        #expect((summary["rejected_batches"] as? Int ?? 0) >= 1)

        let rejected = try await Child.run("influx-tail", ["--spool", spool.path, "--rejected"])
        #expect(rejected.status == 0)
        #expect(rejected.stdout.contains("HTTP 400: unable to parse: bad line"))
        #expect(rejected.stdout.split(separator: "\n").filter { $0.hasPrefix("apihealth_request,") }.count == 20)

        let pendingSpool = temporaryDirectory("tail")
        try await writeSpool(pendingSpool, requests: 10)
        let text = try await Child.run("influx-tail", ["--spool", pendingSpool.path, "--stats"])
        #expect(text.stdout.contains("lines            11"), "10 requests and the agent's health point")
        #expect(text.stdout.contains("api0.example.com") && text.stdout.contains("500"))
    }

    @Test func clearErrorsAndExitStatuses() async throws {
        let missing = try await Child.run("influx-tail", ["--spool", "/nonexistent/spool"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no spool directory at /nonexistent/spool"))

        let usage = try await Child.run("influx-tail", ["--spool", "/tmp", "--format", "xml"])
        #expect(usage.status == 2)
        let badWhere = try await Child.run("influx-tail", ["--spool", "/tmp", "--where", "novalue"])
        #expect(badWhere.status == 2)
        #expect(badWhere.stderr.contains("--where takes tag=value"))

        let help = try await Child.run("influx-tail", ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("Examples:"))

        let locked = temporaryDirectory("tail-locked")
        try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: locked.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: locked.path) }
        if getuid() != 0 {
            let denied = try await Child.run("influx-tail", ["--spool", locked.path])
            #expect(denied.status == 1)
            #expect(denied.stderr.contains("permission denied"))
        }

        let corrupt = temporaryDirectory("tail-corrupt")
        try Data("good v=1i 1\nnot line protocol\ngood v=2i 2\n".utf8).write(
            to: corrupt.appendingPathComponent("00000000000000000001.lp")
        )
        let reported = try await Child.run("influx-tail", ["--spool", corrupt.path])
        #expect(reported.status == 1)
        #expect(reported.stdout == "good v=1i 1\ngood v=2i 2\n", "the rest still prints")
        #expect(reported.stderr.contains("00000000000000000001.lp at byte 12: corrupt line left out"))
    }

    @Test func followShowsLinesAsTheyAreRecordedThroughRotationAndRemoval() async throws {
        let spool = temporaryDirectory("tail-follow").appendingPathComponent("spool")
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        // The tail first, waiting for the spool: every line is recorded after the tail started.
        let tail = try Child("influx-tail", ["--spool", spool.path, "-f", "--measurement", "crash"])
        #expect(await waitUntil { tail.stderr.contains("waiting for it") }, "\(tail.stderr)")
        let writer = try Child("spool-writer", [spool.path, "300", "5", fault.url.absoluteString, "300"])
        #expect(await writer.wait() == 0, "\(writer.stderr)")
        tail.signal(SIGTERM)
        #expect(await tail.wait() != nil, "--follow stops on SIGTERM")
        let seen = Set(
            tail.stdout.split(separator: "\n").compactMap { line -> Int? in
                guard let point = try? LineParser().parseLine(Array(line.utf8)), case .int(let n) = point.field("n")
                else { return nil }
                return Int(n)
            }
        )
        let written = Set(
            fault.stored.compactMap { line -> Int? in
                guard let point = try? LineParser().parseLine(Array(line.utf8)), case .int(let n) = point.field("n")
                else { return nil }
                return Int(n)
            }
        )
        #expect(written.count == 300, "the shipper delivered and removed every segment")
        #expect(seen.count >= 280, "lines recorded after the tail started are all shown (\(seen.count))")
        // The last lines can be sent and removed by the writer's shutdown flush before a poll sees them.
        let missed = Set(60..<280).subtracting(seen).sorted()
        #expect(missed.isEmpty, "nothing recorded while following is missed: \(missed)")
        #expect(try SpoolReader(directory: spool).segments().allSatisfy { $0.lines.isEmpty })
        await fault.shutdown()
    }

    @Test func influxTailShowsControlBytesVisibly() async throws {
        let spool = temporaryDirectory("escapes")
        try markAsSpool(spool)
        try Data("m,host=a s=\"\u{1B}[2J\u{7}\" 1\n".utf8).write(
            to: spool.appendingPathComponent("00000000000000000001.lp")
        )
        for format in ["line", "table"] {
            let tail = try await Child.run(
                "influx-tail",
                ["--spool", spool.path, "--format", format, "--color", "never"]
            )
            #expect(tail.status == 0, "\(tail.stderr)")
            #expect(
                !tail.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" },
                "\(format): \(tail.stdout.debugDescription)"
            )
            #expect(
                tail.stdout.contains("\\x1b[2J") || tail.stdout.contains("\\u001b[2J"),
                "\(format): \(tail.stdout.debugDescription)"
            )
        }
    }
}

@Suite struct SpoolCrashTests {
    @Test func pointsRecordedBeforeAKillSurviveAndShipOnTheNextStart() async throws {
        let spool = temporaryDirectory("crash")
        let writer = try Child("spool-writer", [spool.path, "1000000", "0"])
        // Killed once its 1,001st point was reported over 200 ms ago (the check below allows a point
        // 100 ms to reach the disk), however long the writer took to start.
        let recordedEnough = await waitUntil {
            guard let reported = writer.arrival(ofLine: "recorded 1000") else { return false }
            return reported < ContinuousClock.now - .milliseconds(200)
        }
        #expect(recordedEnough, "\(writer.stderr)")
        writer.signal(SIGKILL)
        let killedAt = ContinuousClock.now
        _ = await writer.wait()
        let reported = writer.lines.filter { $0.at < killedAt - .milliseconds(100) }.compactMap { line -> Int? in
            line.text.hasPrefix("recorded ") ? Int(line.text.dropFirst("recorded ".count)) : nil
        }
        let mustSurvive = (reported.max() ?? -1) + 1
        #expect(mustSurvive > 1_000, "the writer recorded points before the kill (\(mustSurvive))")

        let inSpool = try SpoolReader(directory: spool).segments().flatMap(\.lines).compactMap { line -> Int? in
            guard let point = try? LineParser().parseLine(line), case .int(let n) = point.field("n") else { return nil }
            return Int(n)
        }
        #expect(Set(inSpool).isSuperset(of: 0..<mustSurvive), "every point reported 100 ms before the kill is on disk")

        let victoria = try VictoriaMetrics()
        var configuration = APIHealthConfiguration(
            serviceName: "crash",
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "o", bucket: "b"))
        )
        configuration.spool = SpoolOptions(directory: spool)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "crash"))
        agent.start()
        await agent.shutdown(deadline: .seconds(30))
        #expect(agent.metrics.pointsWritten >= UInt64(inSpool.count))
        #expect(agent.metrics.pendingLines == 0)
        var stored = 0
        _ = try await waitUntil {
            stored = Set(try await victoria.export(namePattern: "crash_n").flatMap(\.values)).count
            return stored >= inSpool.count
        }
        #expect(stored == Set(inSpool).count)
    }

    @Test func tornLinesAreLeftOutAndCorruptSegmentsReportedWhileTheRestShips() async throws {
        let spool = temporaryDirectory("torn")
        try markAsSpool(spool)
        try Data("ok n=1i 1\nok n=2i 2\nok n=3".utf8).write(
            to: spool.appendingPathComponent("00000000000000000001.open.lp")
        )
        try Data("ok n=4i 4\n#comment\n\u{1}garbage=\n".utf8).write(
            to: spool.appendingPathComponent("00000000000000000002.lp")
        )
        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        var configuration = APIHealthConfiguration(
            serviceName: "torn",
            destination: InfluxDestination(url: fault.url, api: .v2(organization: "o", bucket: "b"))
        )
        configuration.spool = SpoolOptions(directory: spool)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "torn"))
        #expect(agent.metrics.spoolLinesLeftOut == 2)
        agent.start()
        let arrived = await fault.waitForRequests(1)
        #expect(arrived)
        await agent.shutdown(deadline: .seconds(60))
        #expect(
            fault.requests.first?.filter { $0.hasPrefix("ok ") }.count == 3,
            "the leftovers are re-batched into one request"
        )
        #expect(
            fault.stored.filter { $0.hasPrefix("ok ") } == ["ok n=1i 1", "ok n=2i 2", "ok n=4i 4"],
            "leftovers first, in order"
        )
        await fault.shutdown()
    }

    @Test func oneAgentPerSpoolAndAFullSpoolDropsTheOldest() async throws {
        let spool = temporaryDirectory("lock").appendingPathComponent("spool")
        var configuration = APIHealthConfiguration(serviceName: "lock")
        configuration.spool = SpoolOptions(directory: spool)
        configuration.batching.maximumBytes = 4 * 1_024
        configuration.batching.maximumPendingBytes = 16 * 1_024
        let first = try APIHealthAgent(configuration: configuration, logger: Logger(label: "lock"))
        #expect(throws: SpoolError.locked(directory: spool.path)) {
            _ = try APIHealthAgent(configuration: configuration, logger: Logger(label: "lock"))
        }
        first.start()
        for index in 0..<2_000 {
            first.write(Point(measurement: "fill", fields: [Point.Field("n", .int(Int64(index)))]))
        }
        await first.shutdown(deadline: .milliseconds(200))
        #expect(first.metrics.pointsDropped > 1_000)
        let attributes = try FileManager.default.attributesOfItem(atPath: spool.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let segments = try SpoolReader(directory: spool).segments()
        let bytes = segments.reduce(0) { $0 + $1.lines.reduce(0) { $0 + $1.count + 1 } }
        #expect(bytes <= 16 * 1_024 + 4 * 1_024)
        let remaining = segments.flatMap(\.lines).compactMap { try? LineParser().parseLine($0)?.field("n") }
        #expect(remaining.last == .int(1_999), "the newest are kept")
        for segment in segments {
            let mode = try FileManager.default.attributesOfItem(atPath: segment.url.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    @Test func anUnusableSpoolDirectoryIsAClearError() throws {
        let file = temporaryDirectory("notdir").appendingPathComponent("file")
        try Data().write(to: file)
        var configuration = APIHealthConfiguration(serviceName: "bad")
        configuration.spool = SpoolOptions(directory: file)
        #expect(throws: SpoolError.self) {
            _ = try APIHealthAgent(configuration: configuration, logger: Logger(label: "bad"))
        }
    }
}
