// The README's Vapor block as a Vapor application: ReadmeTests fails when a line of the README's Swift
// is in neither this file nor Tests/ReadmeExample/main.swift. Run with the arguments of Vapor's `serve`
// (e.g. `serve --hostname 127.0.0.1 --port 0`), API_URL (an API on loopback) and the settings
// `fromEnvironment` reads, it prints `listening PORT`; `GET /checkout/ID` calls the API's
// `/charges/ID` through `req.client`. It runs until SIGTERM, when Vapor stops the server and then the
// agent, which sends what is pending, its swift-metrics points among it.
import APIHealth
import APIHealthMetrics
import APIHealthVapor
import CoreMetrics
import Foundation
import Logging
import Vapor

/// Prints `text` as a line at once (stdout is a pipe when the test runs this).
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

struct Charge: Content {
    var id: String
}

let api = ProcessInfo.processInfo.environment["API_URL"] ?? "http://127.0.0.1:8080"
let logger = Logger(label: "checkout")
let environment = try Environment.detect()
let app = try await Application.make(environment)
let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "checkout"), logger: logger)
MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent))

// swift-format-ignore
app.lifecycle.use(APIHealthLifecycle(agent))            // started at boot, stopped after the server
// swift-format-ignore
app.clients.use(.apihealth(agent, module: "payments"))  // every req.client and app.client call

app.get("checkout", ":id") { req async throws -> String in
    let url = URI(string: api + "/charges/" + (req.parameters.get("id") ?? ""))
    do {
        // swift-format-ignore
        let charge = try agent.decode(Charge.self, from: try await req.client.get(url), url: url, module: "payments")
        return "charge \(charge.id)"
    } catch is DecodingError {
        return "not a charge"
    }
}

do {
    try await app.startup()
    say("listening \(app.http.server.shared.localAddress?.port ?? 0)")
    try await app.running?.onStop.get()
} catch {
    app.logger.report(error: error)
    try? await app.asyncShutdown()
    exit(1)
}
try await app.asyncShutdown()
