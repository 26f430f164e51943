import APIHealth
import Foundation
import LineProtocol
import Logging

// A child process for the spool tests: records points in a loop through a real agent and reports
// each one on standard output once `write` has returned.
//   spool-writer SPOOL_DIR COUNT INTERVAL_MS [INFLUX_URL] [FLUSH_MS]
func report(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
let arguments = CommandLine.arguments
let directory = URL(fileURLWithPath: arguments[1])
let count = Int(arguments[2]) ?? Int.max
let interval = Int(arguments[3]) ?? 1
var configuration = APIHealthConfiguration(serviceName: "spool-writer")
configuration.spool = SpoolOptions(directory: directory)
// No periodic health point: its first end is in 2070 (a day's interval ends at every midnight UTC).
configuration.selfMetricsInterval = .seconds(100 * 365 * 86_400)
if arguments.count > 4, let url = URL(string: arguments[4]) {
    configuration.destination = InfluxDestination(url: url, api: .v2(organization: "acme", bucket: "apis"))
}
if arguments.count > 5, let milliseconds = Int(arguments[5]) {
    configuration.batching.flushDelay = .milliseconds(milliseconds)
}
let agent: APIHealthAgent
do {
    agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "spool-writer"))
} catch {
    FileHandle.standardError.write(Data("spool-writer: \(error)\n".utf8))
    exit(3)
}
agent.start()
let base = Int64(Date().timeIntervalSince1970) * 1_000_000_000
var index = 0
while index < count {
    agent.write(
        Point(
            measurement: "crash",
            tags: [Point.Tag("writer", "w")],
            fields: [Point.Field("n", .int(Int64(index)))],
            timestamp: Timestamp(nanosecondsSinceEpoch: base + Int64(index) * 1_000)
        )
    )
    report("recorded \(index)")
    index += 1
    if interval > 0 { usleep(useconds_t(interval * 1_000)) }  // the writer's pace, set by the test that runs it
}
let done = DispatchSemaphore(value: 0)
Task.detached {
    // Generous: the tests that send expect everything delivered, on however busy a machine.
    await agent.shutdown(deadline: .seconds(60))
    done.signal()
}
done.wait()
report("done")
