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
    /// (`APIHEALTH_INSTANCE`).
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
    /// Requests summed per endpoint and interval, with a mergeable duration histogram; `nil` writes
    /// no interval points (and then every request is written as a point of its own).
    public var aggregation: AggregationOptions? = AggregationOptions()
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
    var writesUnsignedAsSigned: Bool {
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
        self.serviceName = serviceName
        self.destination = destination
        self.spool = SpoolOptions(directory: SpoolOptions.defaultDirectory(serviceName: serviceName))
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
        /// The path tag of requests past the cap.
        public var overflowPath = "{overflow}"
        /// Hosts never recorded (the destination's host is always excluded).
        public var excludedHosts: Set<String> = []
        /// Request and response headers whose value becomes the `correlation_id` field (first found); a
        /// `traceparent` value is recorded as its trace id.
        public var correlationHeaders = ["X-Request-Id", "X-Correlation-Id", "traceparent"]
        /// Which requests are also written as a point of their own; every request is counted in the interval
        /// aggregates whatever this says (`APIHEALTH_RAW_POINTS=all|errors-and-slow|none`). Default ``RawPoints/all``.
        public var rawPoints = RawPoints.all
        /// Trace headers for requests to first-party hosts (see ``TracePropagation``); `nil` (the default)
        /// adds none. With it, a request's `traceparent` is the first correlation header looked at.
        public var tracePropagation: TracePropagation?
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
        /// it quick: it runs once per request.
        public var filter: (@Sendable (RequestSample, SentRequest) -> RequestSample?)?

        /// The defaults: automatic templating only, 500 distinct paths, learning after 20 values.
        public init() {}
    }

    /// What is wrong with a configuration; thrown at start, never silently ignored.
    public enum Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        /// Other `INFLUX_` settings are given, but no `INFLUX_URL`.
        case missingURL
        /// A destination URL without a scheme and host.
        case relativeURL(String)
        /// A destination URL that is neither http nor https.
        case unsupportedScheme(String)
        /// A precision other than `ns`, `us`, `ms` or `s`.
        case unknownPrecision(String)
        /// A write API other than `v2`, `v1` or `v3`.
        case unknownWriteAPI(String)
        /// A setting the chosen write API needs (the environment variable's name).
        case missingSetting(String)
        /// A token file that cannot be read (its path).
        case unreadableTokenFile(String)
        /// A variable whose value cannot be used.
        case invalidValue(name: String, value: String)
        /// A setting that cannot be used, and why.
        case invalidSetting(name: String, reason: String)

        public var description: String {
            switch self {
            case .missingURL: return "INFLUX_URL is required when other INFLUX_ settings are given"
            case .relativeURL(let url): return "the InfluxDB URL \"\(url)\" must be absolute (http://host:port)"
            case .unsupportedScheme(let url): return "the InfluxDB URL \"\(url)\" must use http or https"
            case .unknownPrecision(let value): return "unknown precision \"\(value)\": use ns, us, ms or s"
            case .unknownWriteAPI(let value): return "unknown write API \"\(value)\": use v2, v1 or v3"
            case .missingSetting(let name): return "\(name) is required"
            case .unreadableTokenFile(let path): return "the token file \(path) cannot be read"
            case .invalidValue(let name, let value): return "\(name) has an invalid value \"\(value)\""
            case .invalidSetting(let name, let reason): return "\(name): \(reason)"
            }
        }
    }

    /// Reads the configuration from environment variables.
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `APIHEALTH_ENABLED` | `1`, `true`, `yes`, `on` (default) or `0`, `false`, `no`, `off`; anything else is an error |
    /// | `INFLUX_URL` | base URL of InfluxDB; unset: lines stay pending in the spool |
    /// | `INFLUX_WRITE_API` | `v2` (default), `v1` or `v3` |
    /// | `INFLUX_ORG`, `INFLUX_BUCKET` | v2 organisation and bucket |
    /// | `INFLUX_DATABASE`, `INFLUX_RETENTION_POLICY` | v1 database and retention policy; v3 database |
    /// | `INFLUX_TOKEN`, `INFLUX_TOKEN_FILE` | token, or a file holding it |
    /// | `INFLUX_PRECISION` | `ns` (default), `us`, `ms`, `s` |
    /// | `APIHEALTH_SPOOL_DIR` | spool directory (not empty); `none` keeps pending lines in memory only |
    /// | `APIHEALTH_FLUSH_DELAY_MS`, `APIHEALTH_GZIP_LEVEL` | batching debounce and gzip level |
    /// | `APIHEALTH_WRITE_THROUGH_MS` | how often lines are written through to the spool (``SpoolOptions/writeThroughInterval``, 20 ms) |
    /// | `APIHEALTH_SHUTDOWN_DEADLINE_MS` | how long shutdown keeps sending what is pending (``shutdownDeadline``) |
    /// | `APIHEALTH_INSTANCE` | the `instance` tag (``instance``; the host name by default) |
    /// | `APIHEALTH_TAGS` | tags on every point: `env=prod,region=eu-1` (``globalTags``) |
    /// | `APIHEALTH_RAW_POINTS` | `all` (default), `errors-and-slow` or `none` (``CaptureOptions/rawPoints``) |
    /// | `APIHEALTH_AGGREGATION_INTERVAL_MS` | the interval of the aggregates (``AggregationOptions/interval``, 10 s); `0` turns them off |
    ///
    /// - Parameters:
    ///   - environment: the variables to read (the process's by default).
    ///   - serviceName: names the default spool directory and the `User-Agent`.
    /// - Returns: The configuration the variables describe, with defaults for the rest.
    /// - Throws: ``Error`` for a value that cannot be used: an unknown setting value, an empty
    ///   `APIHEALTH_SPOOL_DIR`, an empty token file or a token holding a line break.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        serviceName: String
    ) throws(Error) -> APIHealthConfiguration {
        var configuration = APIHealthConfiguration(serviceName: serviceName)
        if let enabled = environment["APIHEALTH_ENABLED"] {
            switch enabled.lowercased() {
            case "1", "true", "yes", "on": configuration.isEnabled = true
            case "0", "false", "no", "off": configuration.isEnabled = false
            default:
                throw .invalidSetting(
                    name: "APIHEALTH_ENABLED",
                    reason: "\"\(enabled)\" is not one of 1, true, yes, on, 0, false, no, off"
                )
            }
        }
        if let precision = environment["INFLUX_PRECISION"] {
            guard let value = Precision(rawValue: precision) else { throw .unknownPrecision(precision) }
            configuration.precision = value
        }
        configuration.destinations = try InfluxDestination.allFromEnvironment(
            environment,
            notices: &configuration.notices
        )
        if let text = environment["APIHEALTH_FLUSH_JITTER_MS"] {
            guard let milliseconds = Int(text), milliseconds >= 0 else {
                throw .invalidValue(name: "APIHEALTH_FLUSH_JITTER_MS", value: text)
            }
            configuration.batching.flushJitter = .milliseconds(milliseconds)
        }
        if let directory = environment["APIHEALTH_SPOOL_DIR"] {
            guard !directory.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw .invalidSetting(
                    name: "APIHEALTH_SPOOL_DIR",
                    reason: "is set but empty; give a directory, or none to keep pending lines in memory only"
                )
            }
            configuration.spool = directory == "none" ? nil : SpoolOptions(directory: URL(fileURLWithPath: directory))
        }
        if let text = environment["APIHEALTH_WRITE_THROUGH_MS"] {
            guard let milliseconds = Int(text), milliseconds > 0 else {
                throw .invalidValue(name: "APIHEALTH_WRITE_THROUGH_MS", value: text)
            }
            // Without a spool (`none`) nothing is written through; the setting has nothing to change.
            configuration.spool?.writeThroughInterval = .milliseconds(milliseconds)
        }
        if let text = environment["APIHEALTH_FLUSH_DELAY_MS"] {
            guard let milliseconds = Int(text), milliseconds >= 0 else {
                throw .invalidValue(name: "APIHEALTH_FLUSH_DELAY_MS", value: text)
            }
            configuration.batching.flushDelay = .milliseconds(milliseconds)
        }
        if let text = environment["APIHEALTH_SHUTDOWN_DEADLINE_MS"] {
            guard let milliseconds = Int(text), milliseconds >= 0 else {
                throw .invalidValue(name: "APIHEALTH_SHUTDOWN_DEADLINE_MS", value: text)
            }
            configuration.shutdownDeadline = .milliseconds(milliseconds)
        }
        if let instance = environment["APIHEALTH_INSTANCE"] {
            configuration.instance = instance
        }
        if let text = environment["APIHEALTH_TAGS"] {
            configuration.globalTags = try globalTags(from: text)
        }
        if let text = environment["APIHEALTH_RAW_POINTS"] {
            guard let rawPoints = RawPoints(environmentValue: text) else {
                throw .invalidSetting(
                    name: "APIHEALTH_RAW_POINTS",
                    reason: "\"\(text)\" is not one of all, errors-and-slow, none"
                )
            }
            configuration.capture.rawPoints = rawPoints
        }
        if let text = environment["APIHEALTH_AGGREGATION_INTERVAL_MS"] {
            guard let milliseconds = Int(text), milliseconds >= 0 else {
                throw .invalidValue(name: "APIHEALTH_AGGREGATION_INTERVAL_MS", value: text)
            }
            if milliseconds == 0 {
                configuration.aggregation = nil
            } else {
                configuration.aggregation?.interval = .milliseconds(milliseconds)
            }
        }
        if let text = environment["APIHEALTH_GZIP_LEVEL"] {
            guard let level = Int(text), Gzip.levels.contains(level) else {
                throw .invalidValue(name: "APIHEALTH_GZIP_LEVEL", value: text)
            }
            configuration.gzipLevel = level
        }
        return configuration
    }

    /// This machine's host name (`gethostname`, no name lookup), or `unknown`.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "unknown" : name
    }

    /// `key=value,key=value` as `APIHEALTH_TAGS` gives them (a `\\` keeps the next `,` or `=` as text).
    static func globalTags(from text: String) throws(Error) -> [String: String] {
        var tags: [String: String] = [:]
        var pairs: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "," {
                pairs.append(current)
                current = ""
            } else {
                current.append(character == "=" ? "\u{0}" : character)
            }
        }
        pairs.append(current)
        for pair in pairs where !pair.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = pair.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw .invalidSetting(name: "APIHEALTH_TAGS", reason: "\"\(pair)\" is not key=value")
            }
            let key = parts[0].trimmingCharacters(in: .whitespaces)
            tags[key] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return tags
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

    /// Checks the settings that cannot be checked by their types; ``APIHealthAgent`` does at start.
    ///
    /// - Throws: ``Error`` for the first setting that cannot be used: a reserved or empty global tag, an
    ///   interval that is not a whole number of the precision's unit, raw points other than `all` without
    ///   aggregation, a batch or cap too small, a retry policy that cannot work, a bad URL, token or header.
    public func validate() throws(Error) {
        for (key, value) in globalTags {
            if PointSchema.reservedTags.contains(key) {
                throw .invalidSetting(
                    name: "globalTags",
                    reason:
                        "\"\(key)\" is a tag the agent writes itself (\(PointSchema.reservedTags.sorted().joined(separator: ", "))); set serviceName or instance for those, or pick another key"
                )
            }
            if key.isEmpty || key.hasPrefix("_") {
                throw .invalidSetting(
                    name: "globalTags",
                    reason: "\"\(key)\": a tag key must not be empty or start with _"
                )
            }
            if value.isEmpty {
                throw .invalidSetting(
                    name: "globalTags",
                    reason: "\"\(key)\" has an empty value, which line protocol cannot carry"
                )
            }
        }
        if let aggregation {
            let unit = Duration.nanoseconds(precision.nanosecondsPerUnit)
            if aggregation.interval < unit || aggregation.interval < .milliseconds(1)
                || (RequestSchema.wholeNanoseconds(aggregation.interval) ?? 1) % precision.nanosecondsPerUnit != 0
            {
                throw .invalidSetting(
                    name: "aggregation.interval",
                    reason:
                        "\(aggregation.interval) must be at least 1 ms and a whole number of the precision's unit (\(precision.rawValue)), so interval points never share a timestamp"
                )
            }
            if aggregation.measurement.isEmpty || aggregation.measurement.hasPrefix("_") {
                throw .invalidValue(name: "aggregation.measurement", value: aggregation.measurement)
            }
        } else if capture.rawPoints != .all {
            throw .invalidSetting(
                name: "capture.rawPoints",
                reason:
                    "\(capture.rawPoints) needs aggregation: without it the requests not written would not be counted anywhere"
            )
        }
        if capture.rawPoints.sampleRate.isNaN || !(0...1).contains(capture.rawPoints.sampleRate) {
            throw .invalidValue(name: "capture.rawPoints.sampleRate", value: "\(capture.rawPoints.sampleRate)")
        }
        if batching.maximumLines < 1 {
            throw .invalidValue(name: "batching.maximumLines", value: "\(batching.maximumLines)")
        }
        if batching.maximumBytes < 1_024 {
            throw .invalidValue(name: "batching.maximumBytes", value: "\(batching.maximumBytes)")
        }
        if batching.maximumPendingBytes < 2 * batching.maximumBytes {
            throw .invalidValue(name: "batching.maximumPendingBytes", value: "\(batching.maximumPendingBytes)")
        }
        if !Gzip.levels.contains(gzipLevel) { throw .invalidValue(name: "gzipLevel", value: "\(gzipLevel)") }
        if measurement.isEmpty || measurement.hasPrefix("_") {
            throw .invalidValue(name: "measurement", value: measurement)
        }
        if let spool, spool.directory.path.isEmpty {
            throw .invalidSetting(name: "spool.directory", reason: "is empty")
        }
        if let spool, spool.writeThroughInterval <= .zero {
            throw .invalidValue(name: "spool.writeThroughInterval", value: "\(spool.writeThroughInterval)")
        }
        if batching.flushJitter < .zero {
            throw .invalidValue(name: "batching.flushJitter", value: "\(batching.flushJitter)")
        }
        try retry.validate()
        if let propagation = capture.tracePropagation {
            if propagation.firstPartyHosts.isEmpty {
                throw .invalidSetting(name: "capture.tracePropagation", reason: "names no first-party host")
            }
            for host in propagation.firstPartyHosts where HostPattern(host) == nil {
                throw .invalidSetting(
                    name: "capture.tracePropagation",
                    reason: "\"\(host)\" is not a host name, host:port or *.domain"
                )
            }
        }
        for rule in capture.successRules {
            if let problem = rule.problem() { throw .invalidSetting(name: "capture.successRules", reason: problem) }
        }
        if destinations.count > BatchingState.maximumDestinations {
            throw .invalidSetting(name: "destinations", reason: "at most \(BatchingState.maximumDestinations)")
        }
        for destination in destinations {
            try destination.validate()
            if let cap = destination.maximumPendingBytes, cap < 2 * batching.maximumBytes {
                throw .invalidValue(name: "destination.maximumPendingBytes", value: "\(cap)")
            }
            if let own = destination.precision, own.nanosecondsPerUnit < precision.nanosecondsPerUnit {
                throw .invalidSetting(
                    name: "destination.precision",
                    reason:
                        "\(own.rawValue) is finer than the agent's precision \(precision.rawValue); set the agent's to the finest"
                )
            }
        }
    }
}

/// An InfluxDB (or compatible) store batches are written to: one URL, or a failover group of URLs
/// that all reach the same data (Telegraf's model).
///
/// ```swift
/// let destination = InfluxDestination(
///     url: URL(string: "http://localhost:8086")!,
///     api: .v2(organization: "acme", bucket: "apihealth"),
///     token: InfluxToken("s3cr3t")
/// )
/// let cluster = InfluxDestination(
///     urls: [URL(string: "http://vminsert-1:8480/insert/0/influx")!, URL(string: "http://vminsert-2:8480/insert/0/influx")!],
///     api: .v2(organization: "", bucket: "")
/// )
/// ```
///
/// The agent starts at a random URL of the group, stays on it while it answers, and moves to the
/// next on a network error, a timeout, a 5xx, 429 or 503, or a configuration error (401, 403, 404);
/// each URL keeps its own backoff and `Retry-After`, and a batch is retried byte for byte on the next.
/// A path in a URL is kept in front of the write path: `http://vminsert:8480/insert/0/influx` writes
/// to `…/insert/0/influx/api/v2/write`.
public struct InfluxDestination: Sendable, Hashable {
    /// Which write endpoint to use.
    public enum WriteAPI: Sendable, Hashable {
        /// `POST /api/v2/write?org=&bucket=&precision=` (InfluxDB 2.x, Cloud, 1.8+ and 3.x compatibility,
        /// VictoriaMetrics, vmagent).
        case v2(organization: String, bucket: String)
        /// `POST /write?db=&rp=&precision=` (InfluxDB 1.x). Unsigned fields are written as integers.
        case v1(database: String, retentionPolicy: String? = nil)
        /// `POST /api/v3/write_lp?db=&precision=&accept_partial=true` (InfluxDB 3): a partial write keeps
        /// the lines the server took, and the refused ones are counted one by one and kept in `rejected/`.
        case v3(database: String)
    }

    /// How request bodies are sent.
    public enum Compression: Sendable, Hashable {
        /// `Content-Encoding: gzip` (the default).
        case gzip
        /// Plain line protocol, for sinks that refuse gzip.
        case identity
    }

    /// The failover group: URLs that reach the same data. Not empty.
    public var urls: [URL]
    /// The write endpoint and where in the store lines go.
    public var api: WriteAPI
    /// Sent as `Authorization: Token …` with every write request; `nil` sends none.
    public var token: InfluxToken?
    /// How it appears in logs and in the agent's health points; the first URL's host and port by default.
    public var name: String?
    /// Extra headers on every write request (`X-Scope-OrgID`, a proxy's key, …).
    public var headers: [String: String] = [:]
    /// How request bodies are sent (gzip by default).
    public var compression: Compression = .gzip
    /// This destination's own cap on its backlog; ``APIHealthConfiguration/Batching/maximumPendingBytes``
    /// when `nil`.
    public var maximumPendingBytes: Int?
    /// The timestamp precision this destination keeps, no finer than the agent's
    /// (``APIHealthConfiguration/precision``): its lines are rewritten to it as they are sent. `nil`: the
    /// agent's.
    public var precision: Precision?

    /// A destination at one URL.
    ///
    /// - Parameters:
    ///   - url: The server's base URL; a path in it is kept in front of the write path.
    ///   - api: The write endpoint and where in the store lines go.
    ///   - token: The API token, if the server needs one.
    public init(url: URL, api: WriteAPI, token: InfluxToken? = nil) {
        self.init(urls: [url], api: api, token: token)
    }

    /// A destination at a failover group of URLs.
    ///
    /// - Parameters:
    ///   - urls: Base URLs that all reach the same data, tried in turn from a random one; not empty.
    ///   - api: The write endpoint and where in the store lines go.
    ///   - token: The API token, if the servers need one.
    public init(urls: [URL], api: WriteAPI, token: InfluxToken? = nil) {
        self.urls = urls
        self.api = api
        self.token = token
    }

    /// The first URL of the group; setting it replaces the group with that URL.
    public var url: URL {
        get { urls[0] }
        set { urls = [newValue] }
    }

    /// The name it is logged with.
    public var displayName: String {
        if let name, !name.isEmpty { return name }
        guard let url = urls.first else { return "destination" }
        return (url.host ?? "destination") + (url.port.map { ":\($0)" } ?? "")
    }

    /// The URL as it may be shown or logged: user and password replaced by `<redacted>`.
    public var redactedURL: String { urls.map { Self.redacted($0.absoluteString) }.joined(separator: ",") }

    /// `text` (a URL) with any user information replaced by `<redacted>`.
    static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let authorityEnd =
            text[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
        guard let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@") else { return text }
        return String(text[..<scheme.upperBound]) + "<redacted>" + String(text[at...])
    }

    /// The destinations the environment describes: `INFLUX_*`, then `INFLUX_2_*`, `INFLUX_3_*`, … for
    /// more destinations, each with the same settings.
    static func allFromEnvironment(
        _ environment: [String: String],
        notices: inout [String]
    ) throws(APIHealthConfiguration.Error) -> [InfluxDestination] {
        var destinations: [InfluxDestination] = []
        if let first = try fromEnvironment(environment, prefix: "INFLUX_", notices: &notices) {
            destinations.append(first)
        }
        var number = 2
        while let next = try fromEnvironment(environment, prefix: "INFLUX_\(number)_", notices: &notices) {
            destinations.append(next)
            number += 1
        }
        return destinations
    }

    static func fromEnvironment(
        _ environment: [String: String],
        prefix: String = "INFLUX_",
        notices: inout [String]
    ) throws(APIHealthConfiguration.Error) -> InfluxDestination? {
        let names = ["ORG", "BUCKET", "TOKEN", "TOKEN_FILE", "DATABASE", "WRITE_API"].map { prefix + $0 }
        guard let urlText = environment[prefix + "URL"], !urlText.isEmpty else {
            if names.contains(where: { environment[$0] != nil }) { throw .missingURL }
            return nil
        }
        var urls: [URL] = []
        for part in urlText.split(separator: ",") {
            let text = part.trimmingCharacters(in: .whitespaces)
            guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
                throw .relativeURL(redacted(text))
            }
            urls.append(url)
        }
        guard !urls.isEmpty else { throw .relativeURL(redacted(urlText)) }
        var token: InfluxToken?
        if let value = environment[prefix + "TOKEN"], !value.isEmpty {
            token = InfluxToken(value)
        } else if let path = environment[prefix + "TOKEN_FILE"] {
            guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw .unreadableTokenFile(path)
            }
            let value = contents.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !value.isEmpty else {
                throw .invalidSetting(name: prefix + "TOKEN_FILE", reason: "\(path) holds no token")
            }
            token = InfluxToken(value)
            if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                let mode = attributes[.posixPermissions] as? Int, mode & 0o004 != 0
            {
                notices.append(
                    "the token file \(path) can be read by other users (mode \(String(mode, radix: 8))); chmod o-r it"
                )
            }
        }
        let api: WriteAPI
        switch environment[prefix + "WRITE_API"] ?? "v2" {
        case "v2":
            guard let org = environment[prefix + "ORG"], !org.isEmpty else { throw .missingSetting(prefix + "ORG") }
            guard let bucket = environment[prefix + "BUCKET"], !bucket.isEmpty else {
                throw .missingSetting(prefix + "BUCKET")
            }
            api = .v2(organization: org, bucket: bucket)
        case "v1":
            guard let database = environment[prefix + "DATABASE"], !database.isEmpty else {
                throw .missingSetting(prefix + "DATABASE")
            }
            api = .v1(database: database, retentionPolicy: environment[prefix + "RETENTION_POLICY"])
        case "v3":
            guard let database = environment[prefix + "DATABASE"], !database.isEmpty else {
                throw .missingSetting(prefix + "DATABASE")
            }
            api = .v3(database: database)
        case let other:
            throw .unknownWriteAPI(other)
        }
        var destination = InfluxDestination(urls: urls, api: api, token: token)
        destination.name = environment[prefix + "NAME"]
        if prefix != "INFLUX_", let precision = environment[prefix + "PRECISION"] {
            guard let value = Precision(rawValue: precision) else { throw .unknownPrecision(precision) }
            destination.precision = value
        }
        if let headers = environment[prefix + "HEADERS"] {
            for pair in headers.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                guard parts.count == 2, !name.isEmpty else {
                    throw .invalidSetting(name: prefix + "HEADERS", reason: "give Name=value pairs separated by commas")
                }
                destination.headers[name] = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        switch environment[prefix + "CONTENT_ENCODING"] ?? "gzip" {
        case "gzip": destination.compression = .gzip
        case "identity": destination.compression = .identity
        case let other:
            throw .invalidSetting(name: prefix + "CONTENT_ENCODING", reason: "\"\(other)\" is not gzip or identity")
        }
        try destination.validate()
        return destination
    }

    func validate() throws(APIHealthConfiguration.Error) {
        guard !urls.isEmpty else { throw .missingURL }
        for url in urls {
            let shown = Self.redacted(url.absoluteString)
            guard let scheme = url.scheme?.lowercased(), url.host != nil else { throw .relativeURL(shown) }
            guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(shown) }
        }
        for (name, value) in headers {
            let isToken = { (text: String) in
                !text.isEmpty && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != ":" }
            }
            guard isToken(name), !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw .invalidSetting(name: "headers", reason: "\"\(name)\" is not a header name with a one-line value")
            }
        }
        if let token {
            if token.value.isEmpty { throw .invalidSetting(name: "token", reason: "is empty") }
            if token.value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw .invalidSetting(name: "token", reason: "holds a line break or another control character")
            }
        }
    }

    /// The write endpoint the agent posts batches to for `precision`, with its query.
    ///
    /// ```swift
    /// let server = URL(string: "http://127.0.0.1:8086")!
    /// let destination = InfluxDestination(url: server, api: .v1(database: "metrics"))
    /// destination.writeURL(precision: .ns)  // http://127.0.0.1:8086/write?db=metrics&precision=ns
    /// ```
    ///
    /// - Parameter precision: The precision of the lines posted.
    /// - Returns: The write URL under the first URL of the group, with its query.
    public func writeURL(precision: Precision) -> URL {
        writeURL(at: url, precision: precision)
    }

    /// The write endpoint under `baseURL` (one URL of the group, its path kept in front) for `precision`.
    func writeURL(at baseURL: URL, precision: Precision) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        let base = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        switch api {
        case .v2(let organization, let bucket):
            components.path = base + "/api/v2/write"
            components.queryItems = [
                URLQueryItem(name: "org", value: organization), URLQueryItem(name: "bucket", value: bucket),
                URLQueryItem(name: "precision", value: precision.rawValue),
            ]
        case .v1(let database, let retentionPolicy):
            components.path = base + "/write"
            components.queryItems =
                [URLQueryItem(name: "db", value: database)]
                + (retentionPolicy.map { [URLQueryItem(name: "rp", value: $0)] } ?? [])
                + [
                    URLQueryItem(
                        name: "precision",
                        value: precision == .us ? "u" : precision == .ns ? "ns" : precision.rawValue
                    )
                ]
        case .v3(let database):
            let names: [Precision: String] = [.ns: "nanosecond", .us: "microsecond", .ms: "millisecond", .s: "second"]
            components.path = base + "/api/v3/write_lp"
            components.queryItems = [
                URLQueryItem(name: "db", value: database), URLQueryItem(name: "precision", value: names[precision]),
                URLQueryItem(name: "accept_partial", value: "true"),
            ]
        }
        return components.url!
    }
}

/// An InfluxDB API token. It prints as `<redacted>` so it never reaches logs, errors or files.
public struct InfluxToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    let value: String

    /// Wraps a token.
    ///
    /// - Parameter value: The token as InfluxDB issued it.
    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

/// Where and how pending lines are kept on disk.
public struct SpoolOptions: Sendable, Hashable {
    /// The spool directory: created (mode 700) when missing; an existing one must be empty or a spool.
    public var directory: URL
    /// `fsync` after every write-through, so pending lines also survive power loss (slower).
    public var fsync = false
    /// How often recorded lines are written through to the spool (a full batch at once): what a
    /// `kill -9` can lose at most (at 2,000 requests/s, about 40 points per 20 ms). Shorter costs more
    /// small writes; captured requests are encoded on the same beat. Default 20 ms
    /// (`APIHEALTH_WRITE_THROUGH_MS`).
    public var writeThroughInterval: Duration = Self.defaultWriteThroughInterval

    /// The default ``writeThroughInterval``: 20 ms.
    public static let defaultWriteThroughInterval: Duration = .milliseconds(20)

    /// Spool options for `directory`.
    ///
    /// - Parameters:
    ///   - directory: The spool directory, of its own: never a shared one such as `/tmp`.
    ///   - fsync: Whether to `fsync` after every write-through.
    ///   - writeThroughInterval: How often recorded lines are written through to the spool.
    public init(
        directory: URL,
        fsync: Bool = false,
        writeThroughInterval: Duration = Self.defaultWriteThroughInterval
    ) {
        self.directory = directory
        self.fsync = fsync
        self.writeThroughInterval = writeThroughInterval
    }

    /// `$XDG_STATE_HOME/apihealth/<service>` (or `~/.local/state/…`); the caches folder on Apple platforms.
    ///
    /// - Parameter serviceName: The service's name, the last component of the path.
    /// - Returns: The directory a service of that name spools in by default.
    public static func defaultDirectory(serviceName: String) -> URL {
        #if canImport(Darwin)
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first!
        #else
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_STATE_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state")
        #endif
        return base.appendingPathComponent("apihealth").appendingPathComponent(serviceName)
    }
}
