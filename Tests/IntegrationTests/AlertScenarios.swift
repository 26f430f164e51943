import Foundation

/// Histories for the alerts that need no objective and for the minimum-traffic guard, replayed like
/// ``AlertHistory``: interval points one a minute, stamped 30 s into it, with explicit timestamps relative to
/// ``AlertHistory/end(now:)``. Each place (a `country` global tag) is one instance of the service.
///
/// - maps: `GET api.maps.example/v1/tiles`, 60 requests a minute from each of BR, DE and US for 13 hours; from BR
///   every request fails to connect (transport errors, `errors_connect`) from 60 to 30 minutes before the end.
/// - video: `GET api.video.example/v1/stream`, the same traffic; from DE half the requests get a 5xx from 120 to
///   90 minutes before the end.
/// - small: `POST api.small.example/v1/orders` from DE, one request a minute for 3.5 days with a 99.9 %
///   availability objective; the one request of the minute 30 minutes before the end fails (a 5xx).
/// - tiny: `GET api.tiny.example/v1/status` from US, one request a minute for 3.5 days, no objective; for the
///   last 6 hours three of every ten minutes' requests fail (30 %).
enum AlertScenarios {
    static let minute: Int64 = 60
    static let hour: Int64 = 3_600
    static let service = "checkout"
    /// The span vmalert replays, ending at the history's end.
    static let replayed = 7 * hour

    /// One endpoint as seen from one country.
    struct Place: Hashable {
        var name: String
        var host: String
        var method: String
        var path: String
        var module: String
        var country: String
        var hasObjectives = false
        /// Requests a minute.
        var requests: Int
        /// How far back its points go.
        var since: Int64

        /// The labels of its endpoint alerts.
        var labels: [String: String] {
            [
                "host": host, "method": method, "path": path, "module": module, "country": country,
                "service": AlertScenarios.service,
            ]
        }
    }

    static let countries = ["BR", "DE", "US"]
    static let maps = countries.map {
        Place(
            name: "maps from \($0)",
            host: "api.maps.example",
            method: "GET",
            path: "/v1/tiles",
            module: "maps",
            country: $0,
            requests: 60,
            since: 13 * hour
        )
    }
    static let video = countries.map {
        Place(
            name: "video from \($0)",
            host: "api.video.example",
            method: "GET",
            path: "/v1/stream",
            module: "video",
            country: $0,
            requests: 60,
            since: 13 * hour
        )
    }
    static let small = Place(
        name: "small",
        host: "api.small.example",
        method: "POST",
        path: "/v1/orders",
        module: "orders",
        country: "DE",
        hasObjectives: true,
        requests: 1,
        since: 3 * 86_400 + 12 * hour
    )
    static let tiny = Place(
        name: "tiny",
        host: "api.tiny.example",
        method: "GET",
        path: "/v1/status",
        module: "status",
        country: "US",
        requests: 1,
        since: 3 * 86_400 + 12 * hour
    )
    static let places = maps + video + [small, tiny]

    /// How the requests of `place`'s minute stamped at `time` ended: (status class, requests), transport errors
    /// being the class `error`.
    static func outcomes(_ place: Place, at time: Int64) -> [(statusClass: String, count: Int)] {
        let all = place.requests
        switch place.host {
        case "api.maps.example" where place.country == "BR" && time > -hour && time <= -30 * minute:
            return [("error", all)]
        case "api.video.example" where place.country == "DE" && time > -2 * hour && time <= -90 * minute:
            return [("2xx", all / 2), ("5xx", all - all / 2)]
        case "api.small.example" where time > -30 * minute && time <= -29 * minute:
            return [("5xx", all)]
        case "api.tiny.example" where time > -6 * hour && [0, 3, 6].contains((time + 6 * hour) / minute % 10):
            return [("5xx", all)]
        default:
            return [("2xx", all)]
        }
    }

    /// The whole history as line protocol with second timestamps.
    static func lines(end: Int64) -> [UInt8] {
        var text = ""
        for place in places {
            let tags =
                "country=\(place.country),host=\(place.host),instance=\(place.country.lowercased())-1,"
                + "method=\(place.method),module=\(place.module),path=\(place.path),service=\(service)"
            let objectives =
                place.hasObjectives
                ? ",objective_availability=0.999,objective_latency=0.99,objective_latency_ms=300" : ""
            for time in stride(from: -place.since + 30, to: 0, by: Int(minute)) {
                for (statusClass, count) in outcomes(place, at: time) {
                    let failed = statusClass == "2xx" ? 0 : count
                    let kinds = statusClass == "error" ? ",errors_connect=\(count)i" : ""
                    let within = place.hasObjectives ? ",requests_within_latency_objective=\(count)i" : ""
                    text +=
                        "apihealth_request_interval,\(tags),status_class=\(statusClass) "
                        + "count=\(count)i,errors=\(failed)i\(kinds)\(objectives)\(within) \(end + time)\n"
                }
            }
        }
        return Array(text.utf8)
    }
}
