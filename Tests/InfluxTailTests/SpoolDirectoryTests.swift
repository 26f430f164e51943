import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// Marks `directory` as a spool, as the agent does when it creates one.
func markAsSpool(_ directory: URL) throws {
    try Data().write(to: directory.appendingPathComponent(SpoolDirectory.markerName))
}

private func spoolConfiguration(_ directory: URL, destination: InfluxDestination? = nil) -> APIHealthConfiguration {
    var configuration = APIHealthConfiguration(serviceName: "safety", destination: destination)
    configuration.spool = SpoolOptions(directory: directory)
    configuration.selfMetricsInterval = noPeriodicHealthPoint
    return configuration
}

private func mode(_ path: String) throws -> Int {
    try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1
}

private func spoolErrorCode(_ body: () throws -> Void) -> SpoolError.Code? {
    do {
        try body()
        return nil
    } catch let error as SpoolError {
        return error.code
    } catch {
        return nil
    }
}

/// Runs a built executable of this package as the unprivileged user `nobody`.
private func runAsNobody(
    _ executable: String,
    _ arguments: [String]
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let result = try await Child.run(executable, arguments, asUser: "nobody")
    return (result.status ?? -1, result.stdout, result.stderr)
}

private let nobody: uid_t = 65_534

/// The spool directory (`SpoolDirectory`) as the agent and influx-tail meet it: refused, adopted, and never
/// followed through links, FIFOs or other users' files.
@Suite struct SpoolDirectoryTests {
    @Test func aDirectoryWithOtherFilesIsRefusedAndLeftAlone() throws {
        let directory = temporaryDirectory("foreign")
        chmod(directory.path, 0o755)
        let foreign = directory.appendingPathComponent("00000000000000000001.lp")
        try Data("theirs v=1i 1\n".utf8).write(to: foreign)
        let code = spoolErrorCode {
            _ = try APIHealthAgent(configuration: spoolConfiguration(directory), logger: Logger(label: "t"))
        }
        #expect(code == .notASpool)
        #expect(try mode(directory.path) == 0o755, "never chmodded")
        #expect(try Data(contentsOf: foreign) == Data("theirs v=1i 1\n".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent(".lock").path))
    }

    @Test func aSpoolOfAnEarlierVersionIsAdoptedButNotOneWithForeignFiles() async throws {
        // The layout the agent wrote before spools were marked: .lock, .precision, rejected/, segments.
        func earlierSpool(extra: String?) throws -> URL {
            let directory = temporaryDirectory("earlier")
            chmod(directory.path, 0o700)
            try Data().write(to: directory.appendingPathComponent(".lock"))
            try Data("ns".utf8).write(to: directory.appendingPathComponent(".precision"))
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("rejected"),
                withIntermediateDirectories: false
            )
            try Data("earlier v=1i 1763800000000000000\n".utf8).write(
                to: directory.appendingPathComponent("00000000000000000007.lp")
            )
            if let extra { try Data("theirs v=1i 1\n".utf8).write(to: directory.appendingPathComponent(extra)) }
            return directory
        }
        let earlier = try earlierSpool(extra: nil)
        let agent = try APIHealthAgent(configuration: spoolConfiguration(earlier), logger: Logger(label: "t"))
        #expect(agent.pendingPoints().contains { $0.measurement == "earlier" }, "its pending line is kept")
        await agent.shutdown(deadline: .milliseconds(100))
        #expect(FileManager.default.fileExists(atPath: earlier.appendingPathComponent(SpoolDirectory.markerName).path))

        let mixed = try earlierSpool(extra: "notes.lp")
        let code = spoolErrorCode {
            _ = try APIHealthAgent(configuration: spoolConfiguration(mixed), logger: Logger(label: "t"))
        }
        #expect(code == .notASpool)
    }

    @Test func anEmptyExistingDirectoryIsMarkedButNeverChmodded() async throws {
        let directory = temporaryDirectory("adopted")
        chmod(directory.path, 0o755)
        let agent = try APIHealthAgent(configuration: spoolConfiguration(directory), logger: Logger(label: "t"))
        await agent.shutdown(deadline: .milliseconds(100))
        #expect(try mode(directory.path) == 0o755)
        #expect(
            FileManager.default.fileExists(atPath: directory.appendingPathComponent(SpoolDirectory.markerName).path)
        )

        let created = temporaryDirectory("created").appendingPathComponent("a/b/spool")
        let second = try APIHealthAgent(configuration: spoolConfiguration(created), logger: Logger(label: "t"))
        await second.shutdown(deadline: .milliseconds(100))
        #expect(try mode(created.path) == 0o700, "a directory the agent creates is its own")
    }

    @Test func aDirectoryOthersCanWriteOrOfAnotherUserIsRefused() throws {
        let open = temporaryDirectory("world-writable")
        chmod(open.path, 0o777)
        #expect(
            spoolErrorCode {
                _ = try APIHealthAgent(configuration: spoolConfiguration(open), logger: Logger(label: "t"))
            } == .unsafe
        )
        #expect(try mode(open.path) == 0o777, "never chmodded")
        #expect(try FileManager.default.contentsOfDirectory(atPath: open.path).isEmpty, "nothing written")

        let theirs = temporaryDirectory("theirs")
        chmod(theirs.path, 0o700)
        try #require(chown(theirs.path, nobody, 65_534) == 0)
        #expect(
            spoolErrorCode {
                _ = try APIHealthAgent(configuration: spoolConfiguration(theirs), logger: Logger(label: "t"))
            } == .unsafe
        )
    }

    @Test func aSpoolPathUnderARegularFileSaysSo() throws {
        let file = temporaryDirectory("under-file").appendingPathComponent("file")
        try Data().write(to: file)
        do {
            _ = try APIHealthAgent(
                configuration: spoolConfiguration(file.appendingPathComponent("spool")),
                logger: Logger(label: "t")
            )
            Issue.record("the agent started")
        } catch {
            #expect("\(error)".contains("\(file.path) is a file, not a directory"), "\(error)")
            #expect(!"\(error)".contains("NSCocoaErrorDomain"))
        }
    }

    @Test func linksAtTheSpoolPathAndAtRejectedAreRefusedAndTheirTargetsUntouched() throws {
        let target = temporaryDirectory("link-target")
        chmod(target.path, 0o755)
        let link = temporaryDirectory("link-parent").appendingPathComponent("spool")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(
            spoolErrorCode {
                _ = try APIHealthAgent(configuration: spoolConfiguration(link), logger: Logger(label: "t"))
            } == .unsafe
        )
        #expect(try mode(target.path) == 0o755)
        #expect(try FileManager.default.contentsOfDirectory(atPath: target.path).isEmpty)

        let spool = temporaryDirectory("rejected-link")
        try markAsSpool(spool)
        let victim = temporaryDirectory("rejected-victim")
        chmod(victim.path, 0o755)
        try FileManager.default.createSymbolicLink(
            at: spool.appendingPathComponent("rejected"),
            withDestinationURL: victim
        )
        #expect(
            spoolErrorCode {
                _ = try APIHealthAgent(configuration: spoolConfiguration(spool), logger: Logger(label: "t"))
            } == .unsafe
        )
        #expect(try mode(victim.path) == 0o755)
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim.path).isEmpty)
    }

    @Test func plantedLinksInTheSpoolAreNeverFollowed() async throws {
        let spool = temporaryDirectory("planted")
        try markAsSpool(spool)
        let outside = temporaryDirectory("outside")
        let victim = outside.appendingPathComponent("victim")
        try Data("precious\n".utf8).write(to: victim)
        let secret = outside.appendingPathComponent("secret.lp")
        try Data("secret v=1i 1\n".utf8).write(to: secret)
        let dangling = outside.appendingPathComponent("created-through-link")
        try FileManager.default.createSymbolicLink(
            at: spool.appendingPathComponent(".precision.tmp"),
            withDestinationURL: victim
        )
        try FileManager.default.createSymbolicLink(
            at: spool.appendingPathComponent("00000000000000000001.lp"),
            withDestinationURL: secret
        )
        try FileManager.default.createSymbolicLink(
            at: spool.appendingPathComponent("00000000000000000002.open.lp"),
            withDestinationURL: dangling
        )
        try Data("ours v=1i 3\n".utf8).write(to: spool.appendingPathComponent("00000000000000000003.lp"))

        let fault = try await FaultServer.start { _, _ in .text(204, "") }
        let agent = try APIHealthAgent(
            configuration: spoolConfiguration(
                spool,
                destination: InfluxDestination(url: fault.url, api: .v2(organization: "o", bucket: "b"))
            ),
            logger: Logger(label: "t")
        )
        agent.start()
        for index in 0..<20 { agent.write(Point(measurement: "new", fields: [Point.Field("n", .int(Int64(index)))])) }
        await agent.shutdown(deadline: .seconds(60))
        await fault.shutdown()

        #expect(try Data(contentsOf: victim) == Data("precious\n".utf8), "the link target is not overwritten")
        #expect(!FileManager.default.fileExists(atPath: dangling.path), "nothing is created through a dangling link")
        #expect(!fault.stored.contains { $0.hasPrefix("secret") }, "a linked file's lines are never shipped")
        #expect(fault.stored.contains("ours v=1i 3"))
        #expect(fault.stored.filter { $0.hasPrefix("new ") }.count == 20)
        #expect(try Data(contentsOf: secret) == Data("secret v=1i 1\n".utf8))
        for name in ["00000000000000000001.lp", "00000000000000000002.open.lp"] {
            let status = EntryStatus.of(spool.appendingPathComponent(name).path)
            #expect(status?.type == S_IFLNK, "\(name) is left as it was")
        }

        let tail = try await Child.run("influx-tail", ["--spool", spool.path])
        #expect(tail.status == 1)
        #expect(tail.stderr.contains("00000000000000000001.lp: skipped (a symbolic link)"), "\(tail.stderr)")
        #expect(!tail.stdout.contains("secret"))
    }

    @Test func aFIFOOrDirectoryNamedLikeASegmentIsSkippedByTheAgentAndInfluxTail() async throws {
        let spool = temporaryDirectory("fifo")
        try markAsSpool(spool)
        try #require(mkfifo(spool.appendingPathComponent("00000000000000000001.lp").path, 0o600) == 0)
        try FileManager.default.createDirectory(
            at: spool.appendingPathComponent("00000000000000000002.lp"),
            withIntermediateDirectories: false
        )
        try Data("good v=1i 1\n".utf8).write(to: spool.appendingPathComponent("00000000000000000003.lp"))

        let started = ContinuousClock.now
        let tail = try await Child.run("influx-tail", ["--spool", spool.path])
        #expect(ContinuousClock.now - started < .seconds(30), "influx-tail does not hang on a FIFO")
        #expect(tail.status == 1, "exit status \(String(describing: tail.status)), stderr \(tail.stderr)")
        #expect(tail.stdout == "good v=1i 1\n")
        #expect(tail.stderr.contains("00000000000000000001.lp: skipped (a FIFO)"))
        #expect(tail.stderr.contains("00000000000000000002.lp: skipped (a directory)"))

        let follow = try Child("influx-tail", ["--spool", spool.path, "-f"])
        #expect(await waitUntil { follow.stdout.contains("good v=1i 1") }, "\(follow.stderr)")
        // Three more polls, each seen by the new segment it prints: each had the chance to report the
        // skipped entries again (a poll reports before it prints), which they must not.
        var printed = "good v=1i 1\n"
        let later = (4...6).map { spool.appendingPathComponent(String(format: "%020d.lp", $0)) }
        for (index, segment) in later.enumerated() {
            try Data("later v=\(index)i 1\n".utf8).write(to: segment)
            printed += "later v=\(index)i 1\n"
            #expect(await waitUntil { follow.stdout.contains("later v=\(index)i 1") }, "\(follow.stderr)")
        }
        follow.signal(SIGTERM)
        let status = await follow.wait()
        #expect(status != nil, "--follow stops on SIGTERM")
        #expect(follow.stdout == printed)
        #expect(follow.stderr.components(separatedBy: "00000000000000000001.lp: skipped").count == 2, "reported once")
        for segment in later { try FileManager.default.removeItem(at: segment) }

        let agent = try APIHealthAgent(configuration: spoolConfiguration(spool), logger: Logger(label: "t"))
        #expect(agent.pendingPoints().map(\.measurement) == ["good"])
        await agent.shutdown(deadline: .milliseconds(100))
        #expect(EntryStatus.of(spool.appendingPathComponent("00000000000000000001.lp").path)?.type == S_IFIFO)
    }

    @Test func asAnUnprivilegedUserOnlyOwnFilesAreUsed() async throws {
        // Every folder here is one `nobody` can reach, wherever the checkout and TMPDIR are.
        let parent = try sharedTemporaryDirectory("unprivileged")
        try #require(chown(parent.path, nobody, 65_534) == 0)
        let spool = parent.appendingPathComponent("spool")
        let first = try await runAsNobody("spool-writer", [spool.path, "5", "0"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(EntryStatus.of(spool.path)?.owner == nobody)

        // A segment planted by another user (root here) is neither read nor removed.
        let planted = spool.appendingPathComponent("00000000000000000000.lp")
        try Data("planted v=1i 1\n".utf8).write(to: planted)
        let second = try await runAsNobody("spool-writer", [spool.path, "5", "0"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(FileManager.default.fileExists(atPath: planted.path))
        let lines = try SpoolReader(directory: spool).segments().flatMap(\.lines).map {
            String(decoding: $0, as: UTF8.self)
        }
        #expect(lines.filter { $0.hasPrefix("crash") }.count == 10)

        // A spool directory of another user is refused.
        let rootSpool = try sharedTemporaryDirectory("root-spool")
        chmod(rootSpool.path, 0o755)
        let refused = try await runAsNobody("spool-writer", [rootSpool.path, "1", "0"])
        #expect(refused.status == 3)
        #expect(refused.stderr.contains("owned by uid 0"), "\(refused.stderr)")

        // influx-tail reports a spool it may not read.
        let closed = try sharedTemporaryDirectory("closed")
        chmod(closed.path, 0o700)
        let denied = try await runAsNobody("influx-tail", ["--spool", closed.path])
        #expect(denied.status == 1)
        #expect(denied.stderr.contains("permission denied"), "\(denied.stderr)")
    }
}
