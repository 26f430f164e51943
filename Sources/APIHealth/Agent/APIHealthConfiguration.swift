import Foundation
import LineProtocol

/// Everything the agent needs: where to ship, how to batch and retry, what to capture.
///
/// ```swift
/// var configuration = try APIHealthConfiguration.fromEnvironment(serviceName: "checkout")
/// configuration.capture.pathRules = ["api.example.com/users/*/orders/**"]
/// let agent = try APIHealthAgent(configuration: configuration, logger: logger)
/// ```
///
/// Every setting has a default; ``fromEnvironment(_:serviceName:)`` reads the `INFLUX_*` and
/// `APIHEALTH_*` variables listed in the README.
public struct APIHealthConfiguration: Sendable {
    /// Off means the agent records nothing, ships nothing and leaves requests untouched: it can stand in
    /// for an enabled one everywhere (`run()`, `instrument`, `decode`, `recordingTo:`), and makes no
    /// spool, logs nothing and counts no point lost.
    public var isEnabled = true
    /// Names the default spool directory and the `User-Agent`, and is the `service` tag of every point.
    public var serviceName: String
    /// The `instance` tag of every point, which tells replicas apart: the host name by default
    /// (`APIHEALTH_INSTANCE`). Empty writes no `instance` tag: replicas (or an app's installs, see
    /// ``app(_:version:destination:)``) then share their series, and each stamps its interval points at an
    /// instant of its own within the interval, so none overwrites another's (see <doc:Timestamps>).
    public var instance: String = Self.hostName()
    /// Tags on every point the agent makes — requests, intervals, parse failures, swift-metrics, its own
    /// health — beside `service` and `instance` (`APIHEALTH_TAGS=env=prod,region=eu-1`). Keys the agent
    /// writes itself (``PointSchema/reservedTags``) are refused. A point given to ``APIHealthAgent/write(_:)``
    /// is written as it is; add ``everyPointTags`` to it for the same tags.
    ///
    /// ```swift
    /// configuration.globalTags = ["env": "prod", "region": "eu-1", "version": "2.4.1"]
    /// ```
    public var globalTags: [String: String] = [:]
    /// The `country` global tag: the ISO 3166-1 alpha-2 code of the country the requests are made from
    /// (`APIHEALTH_COUNTRY=BR`), so alerts can say an API cannot be reached from one country. Set as
    /// given, upper-cased; a value that is not a ``CountryCode`` fails ``validate()``. Learned at run time
    /// instead with ``CaptureOptions/countryHeader`` (this value, or the country an earlier launch learned
    /// and kept in the spool directory, then stands until a response says otherwise), or on Apple platforms taken from the user's region setting (`useRegionSettingAsCountry()`) or
    /// the App Store storefront's country (`useStorefrontAsCountry()`).
    ///
    /// ```swift
    /// configuration.country = "BR"    // the same as globalTags["country"] = "BR"
    /// ```
    public var country: String? {
        get { globalTags[PointSchema.Tag.country] }
        set {
            globalTags[PointSchema.Tag.country] = newValue.map { $0.trimmingCharacters(in: .whitespaces).uppercased() }
        }
    }
    /// The `app_version` global tag: the version of the app an install runs (`APIHEALTH_APP_VERSION`), so
    /// a fleet of installs can be split by release without a series per install. ``app(_:version:destination:)``
    /// sets it from the bundle's `CFBundleShortVersionString` on Apple platforms.
    ///
    /// ```swift
    /// configuration.appVersion = "4.2.0"    // the same as globalTags["app_version"] = "4.2.0"
    /// ```
    public var appVersion: String? {
        get { globalTags[PointSchema.Tag.appVersion] }
        set { globalTags[PointSchema.Tag.appVersion] = newValue }
    }
    /// Whether the agent corrects the device's clock from the `Date` headers it sees — its destinations'
    /// first, the API's until a destination has answered — and stamps every point in corrected time
    /// (`APIHEALTH_CLOCK_CORRECTION`). Off by default: a server's clock is kept by NTP; on in the
    /// ``app(_:version:destination:)`` preset, since phones run minutes or hours off. A header that is
    /// missing, malformed, more than a day off or contradicted by the others never moves the clock (see
    /// <doc:APIHealthInAnApp>); the offset applied is ``AgentMetrics/clockOffset``.
    public var correctsClock = false
    /// Requests summed per endpoint and interval, with a mergeable duration histogram; `nil` writes
    /// no interval points (and then needs ``CaptureOptions/rawPoints`` set to ``RawPoints/all``: every
    /// request is written as a point of its own).
    public var aggregation: AggregationOptions? = AggregationOptions()
    /// What "healthy" means for each endpoint: availability and latency objectives, written on the
    /// interval points for burn-rate alerts (`APIHEALTH_OBJECTIVE_AVAILABILITY`,
    /// `APIHEALTH_OBJECTIVE_LATENCY`, `APIHEALTH_OBJECTIVE_LATENCY_MS`). Default: none.
    ///
    /// ```swift
    /// configuration.objectives.default = .init(availability: 0.999)
    /// ```
    public var objectives = ObjectiveOptions()
    /// Where batches go: every point goes to each destination, each with its own backlog, cap, retry
    /// schedule and counters (a destination that is down never delays or drops what another gets).
    /// Empty keeps every line pending in the spool (see `influx-tail`).
    ///
    /// ```swift
    /// configuration.destinations = [
    ///     InfluxDestination(urls: [influxA, influxB], api: .v2(organization: "acme", bucket: "apihealth")),
    ///     InfluxDestination(url: URL(string: "http://vminsert:8480/insert/0/influx")!, api: .v2(organization: "", bucket: "")),
    /// ]
    /// ```
    public var destinations: [InfluxDestination] = []
    /// Whether lines carry unsigned values as integers: InfluxDB 1.x refuses `u`, so with a v1 destination
    /// among them every destination gets integers (one body serves them all).
    package var writesUnsignedAsSigned: Bool {
        destinations.contains { if case .v1 = $0.api { true } else { false } }
    }
    /// The first of ``destinations``; setting it replaces them all (`nil`: none).
    public var destination: InfluxDestination? {
        get { destinations.first }
        set { destinations = newValue.map { [$0] } ?? [] }
    }
    /// Measurement of request points (default ``PointSchema/Measurement/request``).
    public var measurement = PointSchema.Measurement.request
    /// Measurement of parse-failure points (default ``PointSchema/Measurement/parseFailure``).
    public var parseFailureMeasurement = PointSchema.Measurement.parseFailure
    /// Measurement of the agent's own health (default ``PointSchema/Measurement/agent``).
    public var agentMeasurement = PointSchema.Measurement.agent
    /// Timestamp precision of every line, and the write request's `precision`.
    public var precision: Precision = .ns
    /// When batches are cut, and how much may wait for a destination.
    public var batching = Batching()
    /// How failed writes are retried.
    public var retry = RetryPolicy()
    /// zlib level for request bodies: 1 is fastest and shrinks line protocol about twentyfold.
    public var gzipLevel = 1
    /// Time allowed for one write request.
    public var requestTimeout: Duration = .seconds(10)
    /// The on-disk spool of pending lines; `nil` keeps them in memory only.
    public var spool: SpoolOptions?
    /// Which requests are captured and how they become tags.
    public var capture = CaptureOptions()
    /// How often the agent writes its own health point.
    public var selfMetricsInterval: Duration = .seconds(10)
    /// How long graceful shutdown keeps sending what is pending before `run()` returns (the rest
    /// stays in the spool).
    public var shutdownDeadline: Duration = Self.defaultShutdownDeadline
    /// The default of ``shutdownDeadline``: 10 s.
    public static let defaultShutdownDeadline: Duration = .seconds(10)
    /// Problems found while reading the settings that do not stop the agent (a token file others can
    /// read); the agent logs each once at start.
    var notices: [String] = []

    /// A configuration with every default: the spool in the service's default directory
    /// (``SpoolOptions/defaultDirectory(serviceName:)``), and no destination unless one is given.
    ///
    /// - Parameters:
    ///   - serviceName: The `service` tag of every point; names the default spool directory and the
    ///     `User-Agent`.
    ///   - destination: Where batches go; `nil` keeps every line pending in the spool.
    public init(serviceName: String, destination: InfluxDestination? = nil) {
        self.init(serviceDefaults: serviceName, destination: destination)
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        applyAppDefaults(version: nil)
        #endif
    }

    private init(serviceDefaults serviceName: String, destination: InfluxDestination?) {
        self.serviceName = serviceName
        self.destination = destination
        self.spool = SpoolOptions(directory: SpoolOptions.defaultDirectory(serviceName: serviceName))
    }

    /// The defaults for a service: an `instance` tag (the host name), 10 s intervals, failed and slow
    /// requests and a sample of the rest also written raw (``RawPoints/errorsAndSlow``), the 5 s debounce.
    /// The defaults of ``init(serviceName:destination:)`` on Linux and macOS (`APIHEALTH_PRESET=service`).
    ///
    /// ```swift
    /// let configuration = APIHealthConfiguration.service("checkout", destination: influx)
    /// ```
    ///
    /// - Parameters:
    ///   - serviceName: The `service` tag of every point.
    ///   - destination: Where batches go.
    /// - Returns: The configuration.
    public static func service(_ serviceName: String, destination: InfluxDestination? = nil) -> Self {
        Self(serviceDefaults: serviceName, destination: destination)
    }

    /// The defaults for an app, one agent per install (`APIHEALTH_PRESET=app`; the defaults of
    /// ``init(serviceName:destination:)`` on iOS, tvOS, watchOS and visionOS). What differs from a service:
    ///
    /// - no `instance` tag: installs share their series (a million installs are not a million series), each
    ///   stamping its interval points at an instant of its own within the interval, so none overwrites another's;
    /// - `app_version` from the bundle (or `version`), and the country when set;
    /// - ``correctsClock`` on;
    /// - 60 s intervals, no raw points (a failing API would otherwise make every install write),
    ///   batches sent after 60 s without a new line or 5 minutes at most, with up to 30 s of jitter, at
    ///   gzip level 6, 4 MiB pending at most, the health point every 15 minutes.
    ///
    /// Sent in an hour by an app calling 20 endpoints once a second in all: 1,230 points in 12 posts,
    /// about 61 KiB (see <doc:APIHealthInAnApp>).
    ///
    /// ```swift
    /// var configuration = APIHealthConfiguration.app("shop-ios", destination: relay)
    /// configuration.capture.countryHeader = "CloudFront-Viewer-Country"
    /// ```
    ///
    /// - Parameters:
    ///   - name: The `service` tag of every point: the app's name.
    ///   - version: The `app_version` tag; `nil` takes the bundle's version on Apple platforms.
    ///   - destination: Where batches go: `apihealth-relay` with the app's key, which holds the database's
    ///     token and forwards only what the schema allows (<doc:ARelayForAppInstalls>), or a write-only token
    ///     for one bucket.
    /// - Returns: The configuration.
    public static func app(_ name: String, version: String? = nil, destination: InfluxDestination? = nil) -> Self {
        var configuration = Self(serviceDefaults: name, destination: destination)
        configuration.applyAppDefaults(version: version)
        return configuration
    }

    private mutating func applyAppDefaults(version: String?) {
        instance = ""
        appVersion = version ?? Self.bundleVersion() ?? appVersion
        correctsClock = true
        aggregation?.interval = .seconds(60)
        capture.rawPoints = .none
        batching.flushDelay = .seconds(60)
        batching.maximumAge = .seconds(300)
        batching.flushJitter = .seconds(30)
        batching.maximumPendingBytes = 4 << 20
        gzipLevel = 6
        selfMetricsInterval = .seconds(900)
    }

    /// The app's version from its bundle (`CFBundleShortVersionString`); `nil` elsewhere.
    static func bundleVersion() -> String? {
        #if canImport(Darwin)
        return Bundle.main.object(forInfoDictionaryKey: "CFBundleShortVersionString") as? String
        #else
        return nil
        #endif
    }

    /// When batches are cut.
    public struct Batching: Sendable {
        /// A batch is sent this long after its last line was added (debounce).
        public var flushDelay: Duration = .seconds(5)
        /// Under steady traffic the debounce never fires: no batch waits longer than this.
        public var maximumAge: Duration = .seconds(30)
        /// A batch is sent at once when it holds this many lines…
        public var maximumLines = 5_000
        /// …or this many bytes of uncompressed line protocol.
        public var maximumBytes = 1 << 20
        /// Cap on each destination's pending data, in memory and in the spool; past it the oldest batch
        /// it still needs is dropped for it (a destination can set its own, see
        /// ``InfluxDestination/maximumPendingBytes``).
        public var maximumPendingBytes = 64 << 20
        /// A random delay from zero up to this is added to each flush (debounce and maximum age), drawn
        /// anew for every batch, so a fleet of replicas started together does not write in the same second.
        public var flushJitter: Duration = .zero

        /// The defaults: 5 s debounce, 30 s maximum age, 5,000 lines or 1 MiB, a 64 MiB cap, no jitter.
        public init() {}
    }

    /// Which requests are captured and how they become tags.
    public struct CaptureOptions: Sendable {
        /// Firebase-style rules, tried before automatic templating: `*` is one segment, `**` the rest.
        public var pathRules: [String] = []
        /// Distinct (host, path) values before new ones become ``overflowPath``. Templates of positions
        /// learned as parameters give their places back.
        public var maximumDistinctPaths = 500
        /// Distinct literal values at one path position, under one template prefix, past which the
        /// position becomes a parameter for that host and method (keeping the name the position has,
        /// else `{slug}`, `{token}` or `{param}`). A quarter of it is how many values seen once a
        /// position may have before a new one is written as `{new}` (see the README).
        public var learningThreshold = 20
        /// The path tag of requests past the cap, and every endpoint tag of the overflow series past
        /// ``AggregationOptions/maximumEndpoints``.
        public var overflowPath = "{overflow}"
        /// Host patterns written as themselves in the `host` tag (`APIHEALTH_HOST_RULES`, comma-separated):
        /// `*.service.com` makes every subdomain of `service.com` one host, as Sentry's do. Hosts no rule
        /// names are folded as they are learned (numbered labels and IP literals; see the Schema article).
        public var hostRules: [String] = []
        /// Hosts never recorded (the destination's host is always excluded).
        public var excludedHosts: Set<String> = []
        /// Request and response headers whose value becomes the `correlation_id` field (first found); a
        /// `traceparent` value is recorded as its trace id.
        public var correlationHeaders = ["X-Request-Id", "X-Correlation-Id", "traceparent"]
        /// Which requests are also written as a point of their own; every request is counted in the interval
        /// aggregates whatever this says (`APIHEALTH_RAW_POINTS=all|errors-and-slow|none`). Default
        /// ``RawPoints/errorsAndSlow``: every failure and slow request and a sample of the rest, not the cost
        /// of a point for every request. Without ``APIHealthConfiguration/aggregation`` set it to
        /// ``RawPoints/all`` (`APIHEALTH_AGGREGATION_INTERVAL_MS=0` does).
        public var rawPoints = RawPoints.errorsAndSlow
        /// Whether the cache advisor simulates a private cache per candidate lifetime over the responses a cache
        /// could keep (a digest of each body and a hash of each key, kept in memory only), adding the `cache_*`
        /// fields to interval points (`APIHEALTH_CACHE_ADVICE=1`; <doc:WhatToCache>). Off by default, and then
        /// nothing is hashed.
        public var cacheAdvice = false
        /// Trace headers for requests to first-party hosts (see ``TracePropagation``); `nil` (the default)
        /// adds none. With it, a request's `traceparent` is the first correlation header looked at.
        public var tracePropagation: TracePropagation?
        /// A response header the API's CDN adds with the country it saw the client in (Cloudflare's
        /// `CF-IPCountry`, CloudFront's `CloudFront-Viewer-Country`, Fastly's or Akamai's as configured
        /// there); `nil` (the default) learns nothing (`APIHEALTH_COUNTRY_HEADER`). When a response carries
        /// a country code other than the one tagged, the `country` tag changes for every point from then on
        /// (once per change, logged at `info`); a value that is no ``CountryCode`` (`XX`, `T1`) is ignored,
        /// counted in ``AgentMetrics/countryValuesIgnored`` and said once at `warning`. Responses of every
        /// captured host are read: name a header only your own API's CDN sets.
        ///
        /// ```swift
        /// configuration.capture.countryHeader = "CloudFront-Viewer-Country"
        /// ```
        public var countryHeader: String?
        /// Paths whose requests are GraphQL operations (`APIHEALTH_GRAPHQL_PATHS`, comma-separated; default
        /// `["/graphql"]`; `[]`, or the variable empty, turns it off): on any host, a request to one of them
        /// is the endpoint of its operation, `path` tag `/graphql/GetUser`,
        /// its name read from the JSON body the request carries (its first 64 KiB), else from a `GET`'s
        /// `operationName` query item, else the persisted query's hash (`/graphql/{sha256:ecf4edb4}`); an
        /// unnamed operation is `/graphql/{anonymous}` (<doc:APIHealthInAnApp> lists every case). Operation
        /// names count against ``maximumDistinctPaths`` as paths do. Requests to other paths cost one
        /// comparison of their path.
        ///
        /// ```swift
        /// configuration.capture.graphQLPaths = ["/graphql", "/api/graphql"]
        /// ```
        public var graphQLPaths = ["/graphql"]
        /// Statuses that count as a success, or a failure, on some endpoints (see ``SuccessRule``);
        /// elsewhere a status below 400 succeeds and a transport error fails.
        public var successRules: [SuccessRule] = []
        /// The correlation headers in the order they are looked at: `traceparent` first when trace
        /// propagation is on, so the request's trace id is its correlation id.
        var correlationHeadersInOrder: [String] {
            guard tracePropagation != nil else { return correlationHeaders }
            return [TraceParent.headerName]
                + correlationHeaders.filter { $0.lowercased() != TraceParent.headerName }
        }
        /// Sees each request sample before it becomes a point, with the headers the request was sent
        /// with: returns the sample to record, as it is or changed (a path redacted, a module re-tagged),
        /// or `nil` to record nothing. A dropped sample is a choice, not a loss: it is counted in
        /// ``AgentMetrics/requestsFiltered`` (`requests_filtered`) and in no loss count.
        ///
        /// ```swift
        /// configuration.capture.filter = { sample, request in
        ///     if sample.url.path.hasPrefix("/health") { return nil }
        ///     var kept = sample
        ///     if request.value(forHTTPHeaderField: "X-Tenant") == "internal" { kept.module = "internal" }
        ///     return kept
        /// }
        /// ```
        ///
        /// It runs for URLSession and AsyncHTTPClient capture alike, off the request's path (on the
        /// agent's worker, within ``SpoolOptions/writeThroughInterval``), and for samples handed to
        /// ``APIHealthAgent/record(_:)`` on the caller's thread (their headers unknown). It runs before
        /// exclusion and templating, so the sample it returns is excluded and templated as any other. Keep
        /// it quick: it runs once per request. It runs with no lock of the agent held, so it may read the
        /// agent (``APIHealthAgent/metrics`` there counts what was recorded before it).
        public var filter: (@Sendable (RequestSample, SentRequest) -> RequestSample?)?

        /// The defaults: automatic templating only, 500 distinct paths, learning after 20 values.
        public init() {}
    }

    #if canImport(Darwin)
    /// Sets ``country`` from the user's region setting (Settings › General › Language & Region,
    /// `Locale.current.region`): a preference for formats, which says where the user is from or likes
    /// dates written, not where the device is. A traveller, an expatriate or a user who picked another
    /// region is tagged with it. Where the device is, is what the API's CDN sees
    /// (``CaptureOptions/countryHeader``, kept across launches) or, for the account's country,
    /// `useStorefrontAsCountry()`. A region that names no single country (Latin America, `419`) sets nothing.
    ///
    /// ```swift
    /// configuration.useRegionSettingAsCountry()
    /// ```
    public mutating func useRegionSettingAsCountry() {
        if let country = CountryCode(regionIdentifier: Locale.current.region?.identifier) {
            self.country = country.code
        }
    }

    /// The former name of ``useRegionSettingAsCountry()``, which reads the region setting, not where the
    /// device is.
    ///
    /// ```swift
    /// configuration.useRegionSettingAsCountry()
    /// ```
    @available(*, deprecated, renamed: "useRegionSettingAsCountry()")
    public mutating func useDeviceRegionAsCountry() { useRegionSettingAsCountry() }
    #endif

    /// Sets ``country`` from an App Store storefront's country (ISO 3166-1 alpha-3, as StoreKit gives
    /// it); an unknown code sets nothing. `useStorefrontAsCountry()` calls it on Apple platforms.
    ///
    /// ```swift
    /// configuration.setCountry(fromStorefront: "BRA")   // country == "BR"
    /// ```
    package mutating func setCountry(fromStorefront alpha3: String) {
        if let country = CountryCode(alpha3: alpha3) { self.country = country.code }
    }

    /// This machine's host name (`gethostname`, no name lookup), or `unknown`.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "unknown" : name
    }

    /// The `service`, `instance` and global tags, sorted by key.
    ///
    /// ```swift
    /// agent.write(Point(measurement: "queue_depth", tags: configuration.everyPointTags, fields: ["depth": 42]))
    /// ```
    public var everyPointTags: [Point.Tag] {
        var tags = globalTags.map { Point.Tag($0.key, $0.value) }
        tags.append(Point.Tag(PointSchema.Tag.service, serviceName))
        tags.append(Point.Tag(PointSchema.Tag.instance, instance))
        return tags.filter { !$0.value.isEmpty }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }
}
