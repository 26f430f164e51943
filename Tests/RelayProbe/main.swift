// The relay's cost per line, counted by callgrind (scripts/callgrind-relay runs it):
//   relay-probe MODE LINES    LINES lines (a multiple of 5,000) through MODE:
//     relay    the whole intake: gunzip, split, scan, schema check on the bytes, limits, the lines into the
//              agent's batches
//     parse    LineParser.scanLine alone (the spans of a line, nothing built)
//     check    scan and the schema check on the bytes, the line to forward written
//     write    the agent's write of lines already checked (copied into its batches)
//     point    the careful path a line with escapes takes: LineParser.parseLine into a Point and its check
// The body is one gzipped batch of 5,000 interval lines (50 series), as an install's agent writes them, made
// once and sent LINES / 5,000 times, so the difference of two runs is the cost of the lines alone.
@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthRelay
import Foundation
import LineProtocol
import Logging

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let lines = Int(arguments[1]), lines % 5_000 == 0 else {
    print("usage: relay-probe relay|parse|check|write|point LINES (a multiple of 5,000)")
    exit(2)
}
let mode = arguments[0]
let app = "shop-ios"
let now = Timestamp.systemNow().nanosecondsSinceEpoch
var text = ""
for line in 0..<5_000 {
    let series = line % 50
    text += "apihealth_request_interval,app_version=4.2.0,country=BR,host=api.shop.example,method=GET"
    text += ",module=shop,path=/v2/products/\(series),service=\(app),status_class=2xx"
    text += " count=12i,errors=0i,duration_ms_sum=1534.25,duration_ms_min=41.5,duration_ms_max=380.125"
    text += ",request_bytes=0i,response_bytes=48213i,le_100=3i,le_300=11i,le_1000=12i,le_inf=12i"
    text += " \(now - 600_000_000_000 + Int64(line) * 1_000)\n"
}
let plain = Array(text.utf8)
let body = try Gzip.compress(plain, level: 6)

var relayConfiguration = RelayConfiguration(keys: try AppKeys(parsing: "k=\(app):prod"))
relayConfiguration.clientLinesPerMinute = Int.max / 2
relayConfiguration.keyLinesPerMinute = Int.max / 2
var agentConfiguration = APIHealthConfiguration(serviceName: "apihealth-relay")
agentConfiguration.spool = nil
agentConfiguration.selfMetricsInterval = .seconds(100 * 365 * 86_400)
agentConfiguration.batching.maximumPendingBytes = 1 << 30
let agent = try APIHealthAgent(configuration: agentConfiguration, logger: Logger(label: "relay-probe"))
let intake = RelayIntake(configuration: relayConfiguration, agent: agent)
let parser = LineParser(precision: .ns)
let check = relayConfiguration.check
let key = relayConfiguration.keys.app(forKey: "k")!
let wall = Timestamp.systemNow()
let rows = plain.split(separator: UInt8(ascii: "\n")).map(Array.init)
let forwarding = LineCheck.Forwarding(
    app: key,
    precision: agentConfiguration.precision,
    writesUnsignedAsSigned: agentConfiguration.writesUnsignedAsSigned
)
var spans = LineSpans()
var scratch: [UInt8] = []
let checked: [[UInt8]] = rows.map { row in
    scratch.removeAll(keepingCapacity: true)
    row.withUnsafeBufferPointer { line in
        _ = try! parser.scanLine(line, into: &spans)
        _ = check.check(line, spans: spans, precision: .ns, forwarding: forwarding, now: wall, into: &scratch)
    }
    return scratch
}

var taken = 0
for _ in 0..<(lines / 5_000) {
    switch mode {
    case "relay":
        let answer = await intake.handle(
            IntakeRequest(authorization: "Token k", contentEncoding: "gzip", client: "203.0.113.9", body: body)
        )
        if answer.status == 204 { taken += 5_000 }
    case "parse":
        for row in rows {
            row.withUnsafeBufferPointer { line in
                if (try? parser.scanLine(line, into: &spans)) == true { taken += 1 }
            }
        }
    case "check":
        for row in rows {
            scratch.removeAll(keepingCapacity: true)
            row.withUnsafeBufferPointer { line in
                guard (try? parser.scanLine(line, into: &spans)) == true else { return }
                let outcome = check.check(
                    line,
                    spans: spans,
                    precision: .ns,
                    forwarding: forwarding,
                    now: wall,
                    into: &scratch
                )
                if case .forward = outcome { taken += 1 }
            }
        }
    case "write":
        for line in checked where line.withUnsafeBufferPointer({ agent.write(line: $0) }) { taken += 1 }
    case "point":
        for row in rows {
            guard var point = try? parser.parseLine(row) else { continue }
            if check.check(&point, app: key, now: wall) == nil { taken += 1 }
        }
    default:
        print("unknown mode \(mode)")
        exit(2)
    }
}
guard taken == lines else {
    print("relay-probe: \(taken) of \(lines) lines taken")
    exit(1)
}
print("relay-probe \(mode): \(lines) lines taken")
