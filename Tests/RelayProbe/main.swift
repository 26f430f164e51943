// The relay's cost per line, counted by callgrind (scripts/callgrind-relay runs it):
//   relay-probe MODE LINES    LINES lines (a multiple of 5,000) through MODE:
//     relay    the whole intake: gunzip, split, parse, schema check, limits, encode into the agent's batches
//     parse    LineParser alone
//     check    parse and the schema check
//     write    the agent's write of points already parsed and checked (encoding and batching)
// The body is one gzipped batch of 5,000 interval lines (50 series), as an install's agent writes them, made
// once and sent LINES / 5,000 times, so the difference of two runs is the cost of the lines alone.
@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthRelay
import Foundation
import LineProtocol
import Logging

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let lines = Int(arguments[1]), lines % 5_000 == 0 else {
    print("usage: relay-probe relay|parse|check|write LINES (a multiple of 5,000)")
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
let checked: [Point] = rows.map { row in
    var point = try! parser.parseLine(row)!
    _ = check.check(&point, app: key, now: wall)
    return point
}

var taken = 0
for _ in 0..<(lines / 5_000) {
    switch mode {
    case "relay":
        let answer = intake.handle(
            IntakeRequest(authorization: "Token k", contentEncoding: "gzip", client: "203.0.113.9", body: body)
        )
        if answer.status == 204 { taken += 5_000 }
    case "parse":
        for row in rows where (try? parser.parseLine(row)) != nil { taken += 1 }
    case "check":
        for row in rows {
            guard var point = try? parser.parseLine(row) else { continue }
            if check.check(&point, app: key, now: wall) == nil { taken += 1 }
        }
    case "write":
        for point in checked where agent.write(point, keepingTimestamp: true) { taken += 1 }
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
