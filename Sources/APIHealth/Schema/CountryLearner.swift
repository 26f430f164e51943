import LineProtocol

/// The `country` tag learned from a response header the API's CDN adds (``APIHealthConfiguration/CaptureOptions/countryHeader``):
/// the country the server saw this client in. The tag changes once per change of the header's value,
/// never per request: while the value stays the same, a response costs one short lock and a comparison.
///
/// A value that is no ``CountryCode`` (`XX`, `T1`, a typo) is ignored and counted
/// (``AgentMetrics/countryValuesIgnored``); the caller says it once at `warning`.
///
/// A country learned is kept across launches: the spool worker writes it to the spool directory
/// (``takeUnkept()``), and the next launch starts from it (`learned`), so installs that cannot reach the
/// API, the outage the tag exists for, are still tagged with where they are.
///
/// ```swift
/// let learner = CountryLearner(header: "CloudFront-Viewer-Country", everyPointTags: configuration.everyPointTags)
/// if case .changed(let tags) = learner.observe("BR") { /* render new series with `tags` */ }
/// ```
final class CountryLearner: Sendable {
    /// The response header read.
    let header: String

    private struct State {
        /// The last value seen, as the header had it: the same value again changes nothing.
        var lastSeen: String?
        /// `service`, `instance`, the global tags and the learned country, sorted by key.
        var everyPointTags: [Point.Tag]
        var ignored: UInt64 = 0
        /// A country learned that is not yet kept in the spool directory.
        var unkept: String?
    }

    /// Guards the learned tags, the last value seen, the count of ignored values and the country to keep.
    private let state: Locked<State>

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
        self.state = Locked(State(everyPointTags: tags))
    }

    /// The country learned since the last call that is not yet kept, if any (see the type's summary).
    func takeUnkept() -> String? {
        state.withLock { state in
            defer { state.unkept = nil }
            return state.unkept
        }
    }

    private static func tags(_ tags: [Point.Tag], country: String) -> [Point.Tag] {
        let key = PointSchema.Tag.country
        var tags = tags.filter { $0.key != key }
        tags.append(Point.Tag(key, country))
        tags.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return tags
    }

    /// The tags every point carries now.
    var everyPointTags: [Point.Tag] { state.withLock { $0.everyPointTags } }

    /// Values of the header that were not country codes, since the start.
    var ignored: UInt64 { state.withLock { $0.ignored } }

    /// Takes the header's `value` from one response.
    func observe(_ value: String) -> Outcome {
        state.withLock { state in
            if state.lastSeen == value { return .unchanged }
            state.lastSeen = value
            guard let country = CountryCode(value) else {
                state.ignored &+= 1
                return .ignored(value: String(value.prefix(64)), first: state.ignored == 1)
            }
            let key = PointSchema.Tag.country
            if state.everyPointTags.contains(where: { $0.key == key && $0.value == country.code }) { return .unchanged }
            let tags = Self.tags(state.everyPointTags, country: country.code)
            state.everyPointTags = tags
            state.unkept = country.code
            return .changed(country: country.code, everyPointTags: tags)
        }
    }
}
