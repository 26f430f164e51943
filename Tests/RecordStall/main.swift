@_spi(Package) import APIHealth
import Foundation
import Logging
import APIHealthTestKit

#if canImport(Glibc)
import Glibc
#endif

// How long `record()` keeps a host thread, timed call by call from four threads recording 20,000
// samples a second in all, in the situations that used to stall it (scripts/record-stall runs them all):
//   record-stall SCENARIO SECONDS
// SCENARIO is one of
//   baseline   the destination answers at once; spool without fsync
//   backlog    the destination is down for the first half of the run (503), so small batches pile up,
//              then answers: the backlog is merged and sent
//   fsync      spool with fsync after every write, while another thread keeps the disk busy (writes
//              and fsyncs 4 MiB at a time into the same directory)
//   cap        spool with fsync, the destination down the whole run, a 2 MiB pending cap: the oldest
//              batches are dropped
//   memory     spool, the destination down, the default 64 MiB cap: records as fast as it can until
//              2 × the cap has been recorded, and prints the resident memory the pending data holds
// It prints one line of figures per run; the exit status is 2 when the agent lost count of a point.

let arguments = CommandLine.arguments
guard arguments.count == 3, let seconds = Double(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: record-stall baseline|backlog|fsync|cap|memory SECONDS\n".utf8))
    exit(64)
}
let scenario = arguments[1]
let threads = 4
let ratePerThread = 5_000

/// Nanoseconds on the monotonic clock.
@Sendable func nowNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Resident memory of this process, in bytes (from /proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// A flag several threads read.
final class Switch: Sendable {
    /// Guards the flag.
    private let value = Locked(false)
    var isUp: Bool { value.withLock { $0 } }
    func set(_ up: Bool) { value.withLock { $0 = up } }
}

let destinationUp = Switch()
destinationUp.set(scenario == "baseline" || scenario == "fsync")
let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var serverBox: LoopbackHTTPServer?
Task.detached {
    do {
        serverBox = try await LoopbackHTTPServer.start(threads: 1) { request in
            guard request.path == "/api/v2/write" else { return .text(404, "no") }
            // Retry-After: 1 while down, so the backlog is tried (and joined) every second.
            return destinationUp.isUp
                ? LoopbackHTTPServer.Response(status: 204) : .text(503, "down", headers: [("Retry-After", "1")])
        }
    } catch {
        FileHandle.standardError.write(Data("record-stall: \(error)\n".utf8))
        exit(1)
    }
    finished.signal()
}
finished.wait()
guard let server = serverBox else { exit(1) }

let spoolDirectory = FileManager.default.temporaryDirectory
    .appendingPathComponent("record-stall-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
/// Ends the run, leaving no spool behind (`exit` skips a top-level `defer`).
func finish(_ status: Int32) -> Never {
    try? FileManager.default.removeItem(at: spoolDirectory)
    exit(status)
}
var configuration = APIHealthConfiguration(
    serviceName: "record-stall",
    destination: InfluxDestination(url: URL(string: server.baseURL)!, api: .v2(organization: "o", bucket: "b"))
)
configuration.spool = SpoolOptions(directory: spoolDirectory, fsync: scenario == "fsync" || scenario == "cap")
configuration.batching.flushDelay = .milliseconds(scenario == "backlog" ? 20 : 200)
configuration.batching.maximumAge = .seconds(1)
configuration.retry.maximumRetryDuration = .seconds(3_600)
// Every sample a point of its own: the lines these scenarios batch, spool and pile up.
configuration.capture.rawPoints = .all
if scenario == "cap" {
    configuration.batching.maximumPendingBytes = 2 << 20
    configuration.batching.maximumBytes = 128 << 10
}
var logger = Logger(label: "record-stall")
logger.logLevel = .error
let agent: APIHealthAgent
do {
    agent = try APIHealthAgent(configuration: configuration, logger: logger)
} catch {
    FileHandle.standardError.write(Data("record-stall: \(error)\n".utf8))
    finish(3)
}
agent.start()

let paths = (0..<20).map { "https://api.example.com/v1/resource\($0)/items" }.map { URL(string: $0)! }
@Sendable func sample(_ index: Int) -> RequestSample {
    RequestSample(
        method: "GET",
        url: paths[index % paths.count],
        module: "stall",
        startedAt: Date(),
        duration: .microseconds(1_000 + index % 5_000),
        statusCode: index % 50 == 0 ? 503 : 200,
        requestBytes: 120,
        responseBytes: 4_096
    )
}

if scenario == "memory" {
    let before = residentBytes()
    var peak = before
    // Until the cap is reached, then as many points again: the pending data is at its cap.
    var index = 0
    var firstDrop: Int?
    while firstDrop.map({ index < 2 * $0 }) ?? true {
        for _ in 0..<10_000 {
            agent.record(sample(index))
            index += 1
        }
        if firstDrop == nil && agent.metrics.pointsDropped > 0 { firstDrop = index }
        peak = max(peak, residentBytes())
    }
    // Let the write-through loop write the spool and compress the backlog, then read the memory held.
    for _ in 0..<20 {
        Thread.sleep(forTimeInterval: 0.1)  // a benchmark: samples the memory over two seconds
        peak = max(peak, residentBytes())
    }
    let metrics = agent.metrics
    print(
        String(
            format:
                "memory: %d points recorded, pending %.1f MiB (cap %.0f MiB), %d dropped; resident +%.1f MiB peak, +%.1f MiB now",
            index,
            Double(metrics.pendingBytes) / 1_048_576,
            Double(configuration.batching.maximumPendingBytes) / 1_048_576,
            metrics.pointsDropped,
            Double(peak - before) / 1_048_576,
            Double(residentBytes() - before) / 1_048_576
        )
    )
    finish(0)
}

let disk = Switch()
disk.set(scenario == "fsync")
if disk.isUp {
    Thread.detachNewThread {
        let path = spoolDirectory.appendingPathComponent("disk-load").path
        let chunk = [UInt8](repeating: 0x61, count: 4 << 20)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        while disk.isUp {
            _ = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            fsync(descriptor)
            if lseek(descriptor, 0, SEEK_CUR) > 256 << 20 {
                _ = ftruncate(descriptor, 0)
                lseek(descriptor, 0, SEEK_SET)
            }
        }
        close(descriptor)
        unlink(path)
    }
}
if scenario == "backlog" {
    Thread.detachNewThread {
        Thread.sleep(forTimeInterval: seconds / 2)  // the scenario: the destination is down for half the run
        destinationUp.set(true)
    }
}

nonisolated(unsafe) let latencies = (0..<threads).map { _ in
    UnsafeMutableBufferPointer<UInt64>.allocate(capacity: Int(seconds + 1) * ratePerThread)
}
nonisolated(unsafe) let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: threads)
let group = DispatchGroup()
let start = nowNanoseconds()
let end = start + UInt64(seconds * 1e9)
for thread in 0..<threads {
    group.enter()
    Thread.detachNewThread {
        let interval = UInt64(1e9) / UInt64(ratePerThread)
        var next = start
        var count = 0
        while count < latencies[thread].count {
            let now = nowNanoseconds()
            if now >= end { break }
            if now < next {
                var pause = timespec(tv_sec: 0, tv_nsec: Int(next - now))
                nanosleep(&pause, nil)  // paces each thread to its rate
                continue
            }
            let item = sample(count * threads + thread)
            let before = nowNanoseconds()
            agent.record(item)
            latencies[thread][count] = nowNanoseconds() - before
            count += 1
            next += interval
        }
        counts[thread] = count
        group.leave()
    }
}
group.wait()
disk.set(false)
var all: [UInt64] = []
for thread in 0..<threads { all += latencies[thread][0..<counts[thread]] }
all.sort()
func quantile(_ q: Double, of sorted: [UInt64]) -> Double {
    Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1_000
}
let over1 = all.reduce(0) { $0 + ($1 > 1_000_000 ? 1 : 0) }
let over10 = all.reduce(0) { $0 + ($1 > 10_000_000 ? 1 : 0) }
let metrics = agent.metrics
print(
    String(
        format:
            "%-8@ calls %7d  p50 %7.1f us  p99 %8.1f us  p99.99 %9.1f us  max %9.1f us  >1ms %5d  >10ms %4d  written %7d dropped %6d retries %5d",
        scenario as NSString,
        all.count,
        quantile(0.5, of: all),
        quantile(0.99, of: all),
        quantile(0.9999, of: all),
        Double(all.last ?? 0) / 1_000,
        over1,
        over10,
        metrics.pointsWritten,
        metrics.pointsDropped,
        metrics.retries
    )
)
let accounted =
    metrics.pointsWritten + metrics.pointsDropped + metrics.pointsRejected + metrics.pointsExpired
    + metrics.pointsInvalid + UInt64(metrics.pendingLines)
finish(accounted >= metrics.pointsRecorded ? 0 : 2)
