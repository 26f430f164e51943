import Foundation

/// Histories for the alerts that need no objective and for the minimum-traffic and page guards, replayed like
/// ``AlertHistory``: interval points one a minute per source, with explicit timestamps relative to
/// ``AlertHistory/end(now:)``. A source is a service instance (an `instance` tag, its point stamped 30 s into the
/// minute) or an app install (no `instance`, an `app_version` tag, its point stamped `20 + n` s into the minute, so
/// the installs of one version write one series at distinct times, as a fleet does).
///
/// - maps: `GET api.maps.example/v1/tiles` from BR, DE and US, three instances each at 20 requests a minute, for 13
///   hours; from BR every request fails to connect from 60 to 30 minutes before the end.
/// - video: `GET api.video.example/v1/stream`, the same traffic; from DE half the requests get a 5xx from 120 to 90
///   minutes before the end.
/// - small: `POST api.small.example/v1/orders` from DE, one request a minute for 3.5 days with a 99.9 % availability
///   objective; the one request of the minute 30 minutes before the end fails (a 5xx).
/// - tiny: `GET api.tiny.example/v1/status` from US, one request a minute for 3.5 days, no objective; for the last 6
///   hours three of every ten minutes' requests fail (30 %).
/// - pay: `POST api.pay.example/v1/charge` from BR, DE, FR and US, three instances each at 20 requests a minute; BR and
///   DE fail to connect from 45 to 30 minutes before the end (several places down together).
/// - auth: `POST api.auth.example/v1/token` from BR, DE and US, as maps; every place fails to connect from 45 to 30
///   minutes before the end (a host down everywhere).
/// - solo: `GET api.solo.example/v1/rates`, called from IS only (three instances); it fails to connect from 45 to 30
///   minutes before the end (no elsewhere to compare with).
/// - shop: `GET api.shop.example/v1/cart` from an app: US holds 40 % of the traffic (120 requests a minute over four
///   app versions, five installs each), BR, DE and FR 60 % (60 a minute each, two versions); every US request fails to
///   connect from 45 to 30 minutes before the end.
/// - feed and news: `GET api.feed.example/v1/posts` and `GET api.news.example/v1/articles` from an app in IS (ten
///   installs of 5.0 at ten requests a minute) and DE (the same); from 45 to 30 minutes before the end every request of
///   two IS installs to feed (k − 1) and of three to news (k) fails to connect.
/// - chat: `GET api.chat.example/v1/messages` from the same installs in IS and DE; from 60 to 30 minutes before the end
///   one IS phone on bad Wi-Fi fails to connect on seven requests a minute (about 200), and another, offline, fails
///   on its device on every request (`errors_device`, not an error of the API).
/// - quiet: `GET api.quiet.example/v1/quotes` from DE, two requests a minute (120 an hour) for 3.5 days with a 99.9 %
///   objective; one request of the minutes 30.5 and 28.5 minutes before the end fails (two failures in five minutes,
///   a burn rate of 16.7 over the hour and 200 over five minutes).
/// - h5: `GET api.h5.example/v1/ping` from US, one request a minute for 3.5 days with a 99.9 % objective; for the last 6
///   hours three of every ten minutes' requests fail (30 %).
/// - late: `GET api.late.example/v1/feed` from an app in NO (three installs of 6.0, 20 requests a minute each) with a
///   99.9 % objective; 30 % of its requests fail from 12 minutes before the end, and its points of the last 6 minutes
///   have not arrived (the installs' batches come late).
enum AlertScenarios {
    static let minute: Int64 = 60
    static let hour: Int64 = 3_600
    static let service = "checkout"
    /// The span vmalert replays, ending at the history's end.
    static let replayed = 7 * hour

    /// What writes one place's interval points: a service instance or an app install.
    struct Source: Hashable {
        /// The `instance` tag; `nil` for an app install.
        var instance: String?
        /// The `app_version` tag of an install.
        var version: String?
        /// Seconds into the minute its points are stamped at.
        var second: Int64
    }

    /// One endpoint as seen from one place (a `country` global tag).
    struct Place: Hashable {
        var name: String
        var host: String
        var method: String
        var path: String
        var module: String
        var country: String
        var hasObjectives = false
        /// Requests a minute of each source.
        var requests: Int
        /// How far back its points go.
        var since: Int64
        var sources: [Source]
        /// Where its points stop: the end, or earlier for an app whose latest batches have not arrived yet.
        var until: Int64 = 0

        /// The labels of its endpoint alerts.
        var labels: [String: String] {
            [
                "host": host, "method": method, "path": path, "module": module, "country": country,
                "service": AlertScenarios.service,
            ]
        }
    }

    static func instances(_ country: String, _ count: Int) -> [Source] {
        (1...count).map { Source(instance: "\(country.lowercased())-\($0)", second: 30) }
    }

    /// `perVersion` installs of each of `versions`, stamped at distinct seconds.
    static func installs(_ versions: [String], _ perVersion: Int) -> [Source] {
        versions.enumerated().flatMap { index, version in
            (0..<perVersion).map { Source(version: version, second: 20 + Int64(index * perVersion + $0)) }
        }
    }

    static func place(
        _ host: String,
        _ method: String,
        _ path: String,
        _ module: String,
        from country: String,
        requests: Int,
        sources: [Source],
        since: Int64 = 13 * hour,
        hasObjectives: Bool = false,
        name: String? = nil
    ) -> Place {
        Place(
            name: name ?? "\(module) from \(country)",
            host: host,
            method: method,
            path: path,
            module: module,
            country: country,
            hasObjectives: hasObjectives,
            requests: requests,
            since: since,
            sources: sources
        )
    }

    static let countries = ["BR", "DE", "US"]
    static let maps = countries.map {
        place("api.maps.example", "GET", "/v1/tiles", "maps", from: $0, requests: 20, sources: instances($0, 3))
    }
    static let video = countries.map {
        place("api.video.example", "GET", "/v1/stream", "video", from: $0, requests: 20, sources: instances($0, 3))
    }
    static let small = place(
        "api.small.example",
        "POST",
        "/v1/orders",
        "orders",
        from: "DE",
        requests: 1,
        sources: instances("DE", 1),
        since: 3 * 86_400 + 12 * hour,
        hasObjectives: true,
        name: "small"
    )
    static let tiny = place(
        "api.tiny.example",
        "GET",
        "/v1/status",
        "status",
        from: "US",
        requests: 1,
        sources: instances("US", 1),
        since: 3 * 86_400 + 12 * hour,
        name: "tiny"
    )
    static let pay = ["BR", "DE", "FR", "US"].map {
        place("api.pay.example", "POST", "/v1/charge", "pay", from: $0, requests: 20, sources: instances($0, 3))
    }
    static let auth = countries.map {
        place("api.auth.example", "POST", "/v1/token", "auth", from: $0, requests: 20, sources: instances($0, 3))
    }
    static let solo = place(
        "api.solo.example",
        "GET",
        "/v1/rates",
        "rates",
        from: "IS",
        requests: 20,
        sources: instances("IS", 3)
    )
    static let shop =
        [
            place(
                "api.shop.example",
                "GET",
                "/v1/cart",
                "shop",
                from: "US",
                requests: 6,
                sources: installs(["4.0", "4.1", "4.2", "4.3"], 5)
            )
        ]
        + ["BR", "DE", "FR"].map {
            place(
                "api.shop.example",
                "GET",
                "/v1/cart",
                "shop",
                from: $0,
                requests: 6,
                sources: installs(["4.2", "4.3"], 5)
            )
        }
    static let phones = installs(["5.0"], 10)
    static let feed = ["IS", "DE"].map {
        place("api.feed.example", "GET", "/v1/posts", "feed", from: $0, requests: 10, sources: phones)
    }
    static let news = ["IS", "DE"].map {
        place("api.news.example", "GET", "/v1/articles", "news", from: $0, requests: 10, sources: phones)
    }
    static let chat = ["IS", "DE"].map {
        place("api.chat.example", "GET", "/v1/messages", "chat", from: $0, requests: 10, sources: phones)
    }
    static let quiet = place(
        "api.quiet.example",
        "GET",
        "/v1/quotes",
        "quotes",
        from: "DE",
        requests: 2,
        sources: instances("DE", 1),
        since: 3 * 86_400 + 12 * hour,
        hasObjectives: true,
        name: "quiet"
    )
    static let h5 = place(
        "api.h5.example",
        "GET",
        "/v1/ping",
        "ping",
        from: "US",
        requests: 1,
        sources: instances("US", 1),
        since: 3 * 86_400 + 12 * hour,
        hasObjectives: true,
        name: "h5"
    )
    static let late: Place = {
        var late = place(
            "api.late.example",
            "GET",
            "/v1/feed",
            "late",
            from: "NO",
            requests: 20,
            sources: installs(["6.0"], 3),
            hasObjectives: true,
            name: "late"
        )
        late.until = -6 * minute
        return late
    }()
    static let places =
        maps + video + [small, tiny] + pay + auth + [solo] + shop + feed + news + chat + [quiet, h5, late]

    /// How one minute of requests ended: the status class (`error` for no response), how many, and for transport
    /// errors the interval field counting their kind.
    struct Outcome {
        var statusClass: String
        var count: Int
        var kind: String?
    }

    /// How the requests of `source` of `place` in the minute stamped at `time` (its start, relative to the end) ended.
    static func outcomes(_ place: Place, _ source: Source, at time: Int64) -> [Outcome] {
        let all = place.requests
        let cut = time > -45 * minute && time <= -30 * minute
        let installIndex = place.sources.firstIndex(of: source) ?? 0
        switch place.host {
        case "api.maps.example" where place.country == "BR" && time > -hour && time <= -30 * minute,
            "api.pay.example" where ["BR", "DE"].contains(place.country) && cut,
            "api.auth.example" where cut,
            "api.solo.example" where cut,
            "api.shop.example" where place.country == "US" && cut,
            "api.feed.example" where place.country == "IS" && cut && installIndex < 2,
            "api.news.example" where place.country == "IS" && cut && installIndex < 3:
            return [Outcome(statusClass: "error", count: all, kind: "errors_connect")]
        case "api.video.example" where place.country == "DE" && time > -2 * hour && time <= -90 * minute:
            return [Outcome(statusClass: "2xx", count: all / 2), Outcome(statusClass: "5xx", count: all - all / 2)]
        case "api.small.example" where time > -30 * minute && time <= -29 * minute:
            return [Outcome(statusClass: "5xx", count: all)]
        case "api.tiny.example" where time > -6 * hour && [0, 3, 6].contains((time + 6 * hour) / minute % 10),
            "api.h5.example" where time > -6 * hour && [0, 3, 6].contains((time + 6 * hour) / minute % 10):
            return [Outcome(statusClass: "5xx", count: all)]
        case "api.late.example" where time > -12 * minute:
            return [Outcome(statusClass: "2xx", count: all - 6), Outcome(statusClass: "5xx", count: 6)]
        case "api.quiet.example" where [-30 * minute - 30, -28 * minute - 30].contains(time):
            return [Outcome(statusClass: "2xx", count: all - 1), Outcome(statusClass: "5xx", count: 1)]
        case "api.chat.example" where place.country == "IS" && time > -hour && time <= -30 * minute:
            switch installIndex {
            // Bad Wi-Fi: seven of its ten requests a minute fail to connect, 210 in the half hour.
            case 0:
                return [
                    Outcome(statusClass: "2xx", count: all - 7),
                    Outcome(statusClass: "error", count: 7, kind: "errors_connect"),
                ]
            // Offline: every request fails on the phone itself.
            case 1: return [Outcome(statusClass: "error", count: all, kind: "errors_device")]
            default: return [Outcome(statusClass: "2xx", count: all)]
            }
        default:
            return [Outcome(statusClass: "2xx", count: all)]
        }
    }

    /// The whole history as line protocol with second timestamps.
    static func lines(end: Int64) -> [UInt8] {
        var text = ""
        for place in places {
            let objectives =
                place.hasObjectives
                ? ",objective_availability=0.999,objective_latency=0.99,objective_latency_ms=300" : ""
            for source in place.sources {
                let version = source.version.map { "app_version=\($0)," } ?? ""
                let instance = source.instance.map { "instance=\($0)," } ?? ""
                let tags =
                    "\(version)country=\(place.country),host=\(place.host),\(instance)method=\(place.method),"
                    + "module=\(place.module),path=\(place.path),service=\(service)"
                for minuteStart in stride(from: -place.since, to: place.until, by: Int(minute)) {
                    for outcome in outcomes(place, source, at: minuteStart + 30) {
                        // The device's own failures are not requests to the API: counted apart, in no other field.
                        let device = outcome.kind == "errors_device"
                        let count = device ? 0 : outcome.count
                        let failed = outcome.statusClass == "2xx" || device ? 0 : count
                        let kinds = outcome.kind.map { ",\($0)=\(outcome.count)i" } ?? ""
                        let within = place.hasObjectives ? ",requests_within_latency_objective=\(count)i" : ""
                        text +=
                            "apihealth_request_interval,\(tags),status_class=\(outcome.statusClass) "
                            + "count=\(count)i,errors=\(failed)i\(kinds)\(objectives)\(within) "
                            + "\(end + minuteStart + source.second)\n"
                    }
                }
            }
        }
        return Array(text.utf8)
    }
}
