import LineProtocol

/// The `country` tag learned from a response header the API's CDN adds (``APIHealthConfiguration/CaptureOptions/countryHeader``):
/// the country the server saw this client in. The tag changes once per change of the header's value,
/// never per request: while the value stays the same, a response costs a comparison.
///
/// A value that is no ``CountryCode`` (`XX`, `T1`, a typo) is ignored and counted
/// (``AgentMetrics/countryValuesIgnored``); the caller says it once at `warning`.
///
/// A country learned is kept across launches: the spool worker writes it to the spool directory once it
/// is published (``Published/country``), and the next launch starts from it (`learned`), so installs
/// that cannot reach the API, the outage the tag exists for, are still tagged with where they are.
///
/// Only the record loop touches a learner (it takes every response's header, the Apple platforms' hook's
/// through the intake), so it takes no lock; what others read (the health point's tags, the count of
/// values ignored, the country to keep) the loop publishes when it changes (``published``).
///
/// ```swift
/// let learner = CountryLearner(header: "CloudFront-Viewer-Country", everyPointTags: configuration.everyPointTags)
/// if case .changed(let country, let tags) = learner.observe("BR") { /* render new series with `tags` */ }
/// ```
final class CountryLearner: @unchecked Sendable {
    /// The response header read.
    let header: String

    /// What the loop publishes of a learner for other threads.
    struct Published: Sendable, Equatable {
        /// `service`, `instance`, the global tags and the learned country, sorted by key.
        var everyPointTags: [Point.Tag]
        /// Values of the header that were not country codes, since the start.
        var ignored: UInt64 = 0

        /// The country the tags carry, if any.
        var country: String? { everyPointTags.first { $0.key == PointSchema.Tag.country }?.value }
    }

    /// The last value seen, as the header had it: the same value again changes nothing.
    @exclusivity(unchecked) private var lastSeen: String?
    /// The tags and the count of values ignored: what the loop publishes for other threads to read.
    @exclusivity(unchecked) private(set) var published: Published

    /// What a value seen did.
    enum Outcome: Equatable {
        /// The same value as the last one (or the country already tagged): nothing changes.
        case unchanged
        /// A new country: the tags every point now carries.
        case changed(country: String, everyPointTags: [Point.Tag])
        /// Not a country code: counted; `first` is true for the first one, which the caller logs.
        case ignored(value: String, first: Bool)
    }

    /// A learner of the country in `header`, starting from `learned` (a country code kept by an earlier
    /// launch) when there is one: it stands for the configured country until the header says another.
    init(header: String, everyPointTags: [Point.Tag], learned: String? = nil) {
        self.header = header
        var tags = everyPointTags
        if let learned = learned.flatMap({ CountryCode($0)?.code }) {
            tags = Self.tags(tags, country: learned)
        }
        self.published = Published(everyPointTags: tags)
    }

    private static func tags(_ tags: [Point.Tag], country: String) -> [Point.Tag] {
        let key = PointSchema.Tag.country
        var tags = tags.filter { $0.key != key }
        tags.append(Point.Tag(key, country))
        tags.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return tags
    }

    /// The tags every point carries now.
    var everyPointTags: [Point.Tag] { published.everyPointTags }

    /// Values of the header that were not country codes, since the start.
    var ignored: UInt64 { published.ignored }

    /// Takes the header's `value` from one response.
    func observe(_ value: String) -> Outcome {
        if lastSeen == value { return .unchanged }
        lastSeen = value
        guard let country = CountryCode(value) else {
            published.ignored &+= 1
            return .ignored(value: String(value.prefix(64)), first: published.ignored == 1)
        }
        let key = PointSchema.Tag.country
        if published.everyPointTags.contains(where: { $0.key == key && $0.value == country.code }) { return .unchanged }
        let tags = Self.tags(published.everyPointTags, country: country.code)
        published.everyPointTags = tags
        return .changed(country: country.code, everyPointTags: tags)
    }
}
