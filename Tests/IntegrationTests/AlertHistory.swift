import Foundation

/// A known history of one service's interval points, parse failures and agent health points, written with explicit
/// timestamps, that the shipped alert rules are replayed over: per endpoint and instance one interval point a
/// minute (a 2xx point, and a 5xx point when some failed) for three and a half days, and a health point every 10 s
/// per instance for the last 13 hours. Times are seconds relative to ``end(now:)``; interval points are stamped
/// 30 s into a minute and health points 5 s into 10 s, so that no point sits on an evaluation's window edge.
enum AlertHistory {
    static let minute: Int64 = 60
    static let hour: Int64 = 3_600
    static let day: Int64 = 86_400
    /// How far back the interval points go: the ticket alert's 3-day window, at the replay's start.
    static let length = 3 * day + 12 * hour
    /// The span vmalert replays, ending at ``end(now:)``.
    static let replayed = 12 * hour
    static let instances = ["checkout-1", "checkout-2"]
    static let service = "checkout"
    static let availabilityObjective = 0.999
    static let latencyObjective = 0.99
    static let latencyThreshold = 300.0

    /// The end of the history: a whole hour, an hour or two before `now`.
    static func end(now: Date = Date()) -> Int64 { (Int64(now.timeIntervalSince1970) / hour - 1) * hour }

    /// One endpoint of the service, as seen from one region.
    struct Endpoint: Hashable {
        var name: String
        var host: String
        var method: String
        var path: String
        var module: String
        var region: String
        var hasObjectives: Bool
        /// Requests a minute per instance.
        var requests: Int
        /// How far back its interval points go.
        var since: Int64

        var labels: [String: String] {
            [
                "host": host, "method": method, "path": path, "module": module, "region": region,
                "service": AlertHistory.service,
            ]
        }
    }

    static let healthy = Endpoint(
        name: "healthy",
        host: "api.healthy.example",
        method: "GET",
        path: "/v1/items",
        module: "catalog",
        region: "eu-west",
        hasObjectives: true,
        requests: 1_000,
        since: length
    )
    static let burning = Endpoint(
        name: "burning",
        host: "api.burning.example",
        method: "POST",
        path: "/v1/pay",
        module: "payments",
        region: "eu-west",
        hasObjectives: true,
        requests: 1_000,
        since: length
    )
    /// The same endpoint called from another region, where it works.
    static let burningElsewhere = Endpoint(
        name: "burning, from us-east",
        host: "api.burning.example",
        method: "POST",
        path: "/v1/pay",
        module: "payments",
        region: "us-east",
        hasObjectives: true,
        requests: 1_000,
        since: length
    )
    static let slow = Endpoint(
        name: "slow",
        host: "api.slow.example",
        method: "GET",
        path: "/v1/search",
        module: "search",
        region: "us-east",
        hasObjectives: true,
        requests: 1_000,
        since: length
    )
    static let recovering = Endpoint(
        name: "recovering",
        host: "api.recovering.example",
        method: "GET",
        path: "/v1/profile",
        module: "accounts",
        region: "ap-south",
        hasObjectives: true,
        requests: 1_000,
        since: length
    )
    /// No objective: never a burn-rate alert; its responses stop parsing in the last 30 minutes.
    static let parsing = Endpoint(
        name: "parsing",
        host: "api.parsing.example",
        method: "GET",
        path: "/v1/feed",
        module: "feed",
        region: "eu-west",
        hasObjectives: false,
        requests: 100,
        since: 13 * hour
    )
    static let endpoints = [healthy, burning, burningElsewhere, slow, recovering, parsing]

    /// Failed and slow requests of one instance's interval stamped at `time` (relative to the end).
    static func failures(_ endpoint: Endpoint, instance: String, at time: Int64) -> (errors: Int, slow: Int) {
        switch endpoint {
        // 0.05 % of requests fail (one instance fails one request a minute): a burn rate of 0.5.
        case healthy: (instance == instances[0] ? 1 : 0, 0)
        // 2 % fail in the last hour: a burn rate of 20.
        case burning: (time > -hour ? 20 : 0, 0)
        // 12 % slower than the threshold for the last 4 hours: a latency burn rate of 12.
        case slow: (0, time > -4 * hour ? 120 : 0)
        // 3 % fail from 10 to 7 hours ago: a burn rate of 30 for 3 hours, none since.
        case recovering: (time > -10 * hour && time <= -7 * hour ? 30 : 0, 0)
        default: (0, 0)
        }
    }

    /// The times (relative to the end) of one instance's interval points of `endpoint`.
    static func intervalTimes(_ endpoint: Endpoint) -> [Int64] {
        stride(from: -endpoint.since, to: 0, by: Int(minute)).map { $0 + 30 }
    }

    /// Parse-failure points of one instance: five a minute in the last 30 minutes (5 % of 100 requests).
    static func parseFailureTimes() -> [Int64] {
        intervalTimes(parsing).filter { $0 > -30 * minute }.flatMap { time in (0..<5).map { time - 20 + $0 } }
    }

    static let agentInstances = ["checkout-1", "checkout-2", "checkout-3"]

    /// The health point times of `instance` (relative to the end): every 10 s for 13 hours; checkout-2 stops 30
    /// minutes before the end.
    static func healthPointTimes(_ instance: String) -> [Int64] {
        stride(from: -13 * hour, to: 0, by: 10).map { $0 + 5 }.filter { instance != "checkout-2" || $0 <= -30 * minute }
    }

    /// checkout-3's running total of dropped points: 5 more every 10 s from 2 hours to 90 minutes before the end.
    static func pointsDropped(_ instance: String, at time: Int64) -> Int64 {
        guard instance == "checkout-3" else { return 0 }
        return max(0, min(time, -90 * minute) + 2 * hour) / 10 * 5
    }

    /// The whole history as line protocol with second timestamps.
    static func lines(end: Int64) -> [UInt8] {
        var text = ""
        func tags(_ endpoint: Endpoint, _ instance: String) -> String {
            "host=\(endpoint.host),instance=\(instance),method=\(endpoint.method),module=\(endpoint.module),"
                + "path=\(endpoint.path),region=\(endpoint.region),service=\(service)"
        }
        for endpoint in endpoints {
            let objectives =
                endpoint.hasObjectives
                ? ",objective_availability=\(availabilityObjective),objective_latency=\(latencyObjective)"
                    + ",objective_latency_ms=\(latencyThreshold)" : ""
            for instance in instances {
                for time in intervalTimes(endpoint) {
                    let (errors, slow) = failures(endpoint, instance: instance, at: time)
                    let succeeded = endpoint.requests - errors
                    // Failures are fast; the slow requests are among those that succeeded.
                    let within = endpoint.hasObjectives ? ",requests_within_latency_objective=\(succeeded - slow)i" : ""
                    text +=
                        "apihealth_request_interval,\(tags(endpoint, instance)),status_class=2xx "
                        + "count=\(succeeded)i,errors=0i\(objectives)\(within) \(end + time)\n"
                    if errors > 0 {
                        let within = endpoint.hasObjectives ? ",requests_within_latency_objective=\(errors)i" : ""
                        text +=
                            "apihealth_request_interval,\(tags(endpoint, instance)),status_class=5xx "
                            + "count=\(errors)i,errors=\(errors)i\(objectives)\(within) \(end + time)\n"
                    }
                }
            }
        }
        for instance in instances {
            for time in parseFailureTimes() {
                text +=
                    "apihealth_parse_failure,failure=decoding,\(tags(parsing, instance)),status=200 count=1i "
                    + "\(end + time)\n"
            }
        }
        for instance in agentInstances {
            for (index, time) in healthPointTimes(instance).enumerated() {
                text +=
                    "apihealth_agent,instance=\(instance),region=eu-west,service=\(service) "
                    + "points_recorded=\(index * 10)i,points_dropped=\(pointsDropped(instance, at: time))i,"
                    + "points_lost=0i,points_rejected=0i,points_expired=0i \(end + time)\n"
            }
        }
        return Array(text.utf8)
    }

    /// The burn rate of `endpoint`'s objective over the window (end + to - seconds, end + to], from the history.
    static func burnRate(_ endpoint: Endpoint, latency: Bool, seconds: Int64, to: Int64 = 0) -> Double {
        var total = 0.0
        var bad = 0.0
        for instance in instances {
            for time in intervalTimes(endpoint) where time > to - seconds && time <= to {
                let (errors, slow) = failures(endpoint, instance: instance, at: time)
                total += Double(endpoint.requests)
                bad += Double(latency ? slow : errors)
            }
        }
        return bad / total / (1 - (latency ? latencyObjective : availabilityObjective))
    }
}
