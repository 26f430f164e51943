import Foundation
import LineProtocol
import Logging

/// Turns samples into points: templated, capped paths and the documented tags and fields.
final class RequestSchema: Sendable {
    private let configuration: APIHealthConfiguration
    private let templater: PathTemplater
    private let learner: EndpointLearner
    /// Folds the host names of the `host` tag.
    let hostLearner: HostLearner
    /// The hosts whose requests are left out: the destinations and the configured ones.
    private let excludedHosts: ExcludedHosts
    /// Decides, once per series, whether its requests succeed.
    private let successPolicy: SuccessPolicy
    /// The capture filter, if one is configured.
    let filter: (@Sendable (RequestSample, SentRequest) -> RequestSample?)?
    /// Rendered series by URL, method, module and status: parsing a URL, templating its path and
    /// rendering the tags is most of the cost of a sample, and services call the same URLs again and
    /// again. Emptied whenever the series of some URL changes (a path or host position learned, an
    /// endpoint's aggregate evicted).
    private let rendered = RenderedSeries()
    /// Whether URLs are also found by their shape (``URLShape``): unless a path rule names a number.
    private let findsSeriesByShape: Bool
    /// The scheme, host and port of the URLs called lately, resolved (excluded or not, host tag).
    private let authorities = AuthorityCache()
    /// The request fields' keys, checked and escaped once.
    private let keys = RequestFieldKeys()
    /// `service`, `instance` and the global tags as configured.
    private let configuredEveryPointTags: [Point.Tag]
    /// Learns the `country` tag from responses, when ``APIHealthConfiguration/CaptureOptions/countryHeader`` is set.
    let countryLearner: CountryLearner?
    /// Says once when the country header carries something that is no country code, and each change.
    private let logger: Logger?
    /// The headers a sample's correlation id is read from, in order.
    let correlationHeaders: [String]
    /// The GraphQL paths, whose requests' operations are their endpoints; `nil` when none is configured.
    let graphQL: GraphQLEndpoints?
    /// The interval aggregates (`nil` when ``APIHealthConfiguration/aggregation`` is).
    let aggregator: RequestAggregator?
    private static let statusClasses = (0...9).map { "\($0)xx" }
    private static let knownMethods: Set<String> = [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT",
    ]

    /// The schema of `configuration`'s points; `learnedCountry` is the country an earlier launch learned
    /// from the country header (kept in the spool directory), the tag until the header says another.
    init(configuration: APIHealthConfiguration, logger: Logger? = nil, learnedCountry: String? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.templater = PathTemplater(rules: configuration.capture.pathRules)
        self.findsSeriesByShape = !templater.readsNumericSegments
        self.learner = EndpointLearner(
            threshold: configuration.capture.learningThreshold,
            maximumTemplates: configuration.capture.maximumDistinctPaths,
            overflowPath: configuration.capture.overflowPath,
            renderedSeries: rendered
        )
        self.hostLearner = HostLearner(
            threshold: configuration.capture.learningThreshold,
            rules: configuration.capture.hostRules,
            renderedSeries: rendered
        )
        // A destination is excluded by host and port, so other services on its host are still seen.
        self.excludedHosts = ExcludedHosts(
            entries: configuration.capture.excludedHosts.union(
                configuration.destinations.flatMap { $0.urls.map(Self.hostTag) }
            )
        )
        self.successPolicy = SuccessPolicy(configuration.capture.successRules)
        self.filter = configuration.capture.filter
        self.configuredEveryPointTags = configuration.everyPointTags
        self.countryLearner = configuration.capture.countryHeader.map {
            CountryLearner(header: $0, everyPointTags: configuration.everyPointTags, learned: learnedCountry)
        }
        self.correlationHeaders = configuration.capture.correlationHeadersInOrder
        self.graphQL = GraphQLEndpoints(paths: configuration.capture.graphQLPaths)
        let rendered = self.rendered
        self.aggregator = configuration.aggregation.map {
            RequestAggregator(
                options: $0,
                rawPoints: configuration.capture.rawPoints,
                objectives: configuration.objectives,
                overflowTags: Self.overflowIntervalTags(configuration),
                renderedSeries: rendered
            )
        }
    }

    var pathsOverflowed: UInt64 { learner.overflowed }
    /// Samples whose series was found by their URL's shape (``URLShape``).
    var seriesFoundByShape: UInt64 { rendered.foundByShape }
    /// Paths that fell past the cap since the last call (the record loop's, which publishes them).
    func takePathsOverflowed() -> UInt64 { learner.takeOverflowed() }

    /// `service`, `instance` and the global tags, with the country learned so far: on every point. The
    /// record loop's to read; other threads read what it published (``APIHealthAgent/everyPointTags``).
    var everyPointTags: [Point.Tag] { countryLearner?.everyPointTags ?? configuredEveryPointTags }

    /// Takes the country header's `value` from a response: a new country re-renders every series (the
    /// interval aggregates of the old one end with their interval). Returns whether the learner has
    /// something new to publish (a country, a value ignored).
    func observeCountry(_ value: String) -> Bool {
        guard let countryLearner else { return false }
        switch countryLearner.observe(value) {
        case .unchanged: return false
        case .changed(let country, _):
            rendered.invalidate()
            logger?.info(
                "APIHealth tags points with the country the API's CDN saw",
                metadata: ["apihealth.country": "\(country)", "apihealth.country.header": "\(countryLearner.header)"]
            )
        case .ignored(let value, let first):
            guard first else { return true }
            logger?.warning(
                "APIHealth ignores a country header value that is not an ISO 3166-1 alpha-2 code (counted in country_values_ignored; said once)",
                metadata: [
                    "apihealth.country.header": "\(countryLearner.header)", "apihealth.country.value": "\(value)",
                ]
            )
        }
        return true
    }

    /// The `host` tag of `url`: its host name folded (``HostLearner``), and `:port` when it names one.
    func foldedHostTag(_ url: URL) -> String {
        foldedHostTag(URLParts(scheme: url.scheme, host: url.host, port: url.port, path: "").lowercased())
    }

    /// The `host` tag of a URL with `parts` (its host lowercased).
    func foldedHostTag(_ parts: URLParts) -> String {
        var name = parts.host ?? "unknown"
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        return hostLearner.tag(name: name, port: parts.port)
    }

    /// `host` or `host:port`, lowercased, as the URL has it (for exclusion).
    static func hostTag(_ url: URL) -> String {
        hostTag(host: url.host, port: url.port)
    }

    private static func hostTag(host: String?, port: Int?) -> String {
        let host = host?.lowercased() ?? "unknown"
        return port.map { "\(host):\($0)" } ?? host
    }

    /// Whether requests to `url` are left out (its text read in place when it is a plain URL). Asked
    /// on a request's own thread, before it is hooked.
    func isExcluded(_ url: URL) -> Bool {
        let text = url.absoluteString
        if let excluded = excludedHosts.excludes(urlText: text) { return excluded }
        return excludedHosts.excludes(URLParts(url, text: text, readingPath: false).lowercased())
    }

    /// The templated path (a user rule's, else a learned one), or the overflow value once the cap of
    /// distinct paths is reached.
    func pathTag(host: String, method: String, url: URL) -> String {
        pathTag(host: host, method: method, path: url.path[...])
    }

    /// The templated path of `path` (as `URL.path` gives it).
    func pathTag(host: String, method: String, path: Substring) -> String {
        if templater.hasRules, let ruled = templater.ruleTemplate(host: host, segments: path.pathSegments()) {
            return learner.admit(host: host, template: ruled)
        }
        return learner.template(host: host, method: Self.methodTag(method), path: path)
    }

    /// The path tag of a GraphQL operation: the GraphQL path (as the URL writes it) and the operation's
    /// segment, under the cap of distinct paths (past it, the overflow path).
    func graphQLPathTag(host: String, path: Substring, operation: String) -> String {
        var base = path
        while base.count > 1, base.hasSuffix("/") { base = base.dropLast() }
        return learner.admit(host: host, template: base + "/" + operation)
    }

    static func methodTag(_ method: String) -> String {
        if knownMethods.contains(method) { return method }
        let upper = method.uppercased()
        return knownMethods.contains(upper) ? upper : "OTHER"
    }

    /// The rendered series of `sample` and what `count` made of it (counting it in its endpoint's
    /// aggregate: see ``RenderedSeries``); `nil` for an excluded host; throws when the configured measurement cannot be written. (A typed throw rather than a
    /// `Result`: the record path returns one reference, with no copy of the error's payload to make
    /// and drop.)
    @inline(__always)
    func series<Counted>(
        for sample: RequestSample,
        counting count: (RequestSeries) -> Counted
    ) throws(LineProtocolError) -> (RequestSeries, Counted)? {
        let url = sample.urlText
        let hash = SeriesCache.hash(url, statusCode: sample.statusCode)
        let (found, generation) = rendered.series(for: sample, url: url, hash: hash, counting: count)
        if let found { return found }
        // A URL not seen before that differs from one seen before only in its ids or query (a GraphQL
        // operation's path tag is the path as written, digits and all).
        var shapeHash: UInt64?
        if findsSeriesByShape, sample.graphQLOperation == nil {
            let (shaped, hashOfShape) = rendered.series(forShapeOf: sample, url: url, counting: count)
            if let shaped { return shaped }
            shapeHash = hashOfShape
        }
        return try renderSeries(of: sample, hash: hash, shapeHash: shapeHash, generation: generation, counting: count)
    }

    /// A sample whose series is not cached: rendered, cached, and counted. Its URL's text is read again
    /// here (a few dozen instructions), so the cached path, which every request takes, holds it once.
    @inline(never)
    private func renderSeries<Counted>(
        of sample: RequestSample,
        hash: UInt64,
        shapeHash: UInt64?,
        generation: UInt64,
        counting count: (RequestSeries) -> Counted
    ) throws(LineProtocolError) -> (RequestSeries, Counted)? {
        let url = sample.urlText
        let changesBefore = learner.changes
        let (authority, urlPath) = authorities.resolve(sample, text: url, generation: generation) { parts in
            let excluded = excludedHosts.excludes(parts)
            return ResolvedAuthority(parts: parts, excluded: excluded, hostTag: excluded ? "" : foldedHostTag(parts))
        }
        guard !authority.excluded else { return nil }
        let parts = authority.parts
        let host = authority.hostTag
        let path =
            sample.graphQLOperation.map { graphQLPathTag(host: host, path: urlPath, operation: $0) }
            ?? pathTag(host: host, method: sample.method, path: urlPath)
        // An overflowed path is not cached: it is counted each time; nor a path held back as new,
        // which has its template once its values are seen again.
        let caches = path != configuration.capture.overflowPath && path != EndpointLearner.newPath
        // Its shape only when templating its path changed nothing: another URL of the shape would then
        // have the same template and change nothing either (host tags are the authority's, which a shape
        // keeps; folding a host again changes nothing).
        let shapeHash = learner.changes == changesBefore ? shapeHash : nil
        // A URL not seen before whose endpoint was: its series is the endpoint's (the URL's host is in
        // the key, with its scheme and port, for the success rules and exclusions that read them).
        let endpointKey = EndpointSeriesKey(
            scheme: parts.scheme ?? "",
            host: parts.host ?? "",
            port: parts.port,
            hostTag: host,
            path: path,
            method: sample.method,
            module: sample.module,
            statusCode: sample.statusCode
        )
        if caches,
            let found = rendered.series(
                ofEndpoint: endpointKey,
                url: url,
                hash: hash,
                shapeHash: shapeHash,
                generation: generation,
                counting: count
            )
        {
            return found
        }
        let endpoint = aggregator?.interval(for: intervalTags(for: sample, host: host, path: path))
        let tags =
            endpoint?.overflowed == true
            ? overflowTags(for: sample) : tags(for: sample, host: host, path: path)
        let series = RequestSeries(
            try SeriesKey(measurement: configuration.measurement, tags: tags),
            method: sample.method,
            module: sample.module,
            statusCode: sample.statusCode,
            succeeds: successPolicy.succeeds(
                url: sample.url,
                path: path,
                method: Self.methodTag(sample.method),
                statusCode: sample.statusCode
            ),
            interval: endpoint?.interval
        )
        let counted = rendered.insert(
            series,
            url: url,
            hash: hash,
            endpoint: endpointKey,
            shapeHash: shapeHash,
            generation: generation,
            caches: caches,
            counting: count
        )
        return (series, counted)
    }

    /// The tags of a request whose endpoint is past ``AggregationOptions/maximumEndpoints``: the
    /// overflow value in place of each endpoint tag, so every such request is in one series.
    private func overflowTags(for sample: RequestSample) -> [Point.Tag] {
        typealias T = PointSchema.Tag
        let overflow = configuration.capture.overflowPath
        return [
            Point.Tag(T.host, overflow), Point.Tag(T.path, overflow), Point.Tag(T.method, overflow),
            Point.Tag(T.module, overflow), Point.Tag(T.status, overflow), Point.Tag(T.statusClass, overflow),
        ] + everyPointTags
    }

    /// The tags of the one interval aggregate of every endpoint past the cap, sorted by key.
    static func overflowIntervalTags(_ configuration: APIHealthConfiguration) -> [Point.Tag] {
        typealias T = PointSchema.Tag
        let overflow = configuration.capture.overflowPath
        let tags =
            [
                Point.Tag(T.host, overflow), Point.Tag(T.path, overflow), Point.Tag(T.method, overflow),
                Point.Tag(T.module, overflow), Point.Tag(T.statusClass, overflow),
            ] + configuration.everyPointTags
        return tags.filter { !$0.value.isEmpty }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    private func tags(for sample: RequestSample, host: String, path: String) -> [Point.Tag] {
        typealias T = PointSchema.Tag
        return [
            Point.Tag(T.host, host), Point.Tag(T.path, path),
            Point.Tag(T.method, Self.methodTag(sample.method)), Point.Tag(T.module, sample.module),
            Point.Tag(T.status, sample.statusCode.map(String.init) ?? "error"),
            Point.Tag(T.statusClass, Self.statusClass(sample.statusCode)),
        ] + everyPointTags
    }

    /// The tags of the endpoint's interval aggregate, sorted by key: the request's, by status class.
    private func intervalTags(for sample: RequestSample, host: String, path: String) -> [Point.Tag] {
        typealias T = PointSchema.Tag
        let tags =
            [
                Point.Tag(T.host, host), Point.Tag(T.path, path), Point.Tag(T.method, Self.methodTag(sample.method)),
                Point.Tag(T.module, sample.module), Point.Tag(T.statusClass, Self.statusClass(sample.statusCode)),
            ] + everyPointTags
        return tags.filter { !$0.value.isEmpty }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    /// `2xx`…, or `error` for a request without a response.
    static func statusClass(_ statusCode: Int?) -> String {
        statusCode.map { statusClasses[min(max($0 / 100, 0), 9)] } ?? "error"
    }

    /// Whether the request failed: a transport error, or a status its series does not count as a success
    /// (``RequestSeries/succeeds``: 400 or more unless a ``SuccessRule`` says otherwise).
    static func isFailure(_ sample: RequestSample, series: RequestSeries) -> Bool {
        sample.error != nil || !series.succeeds
    }

    /// Whether the request failed, and how (``isFailure(_:series:)``, with the kind of a transport error).
    @inline(__always)
    static func failure(_ sample: RequestSample, series: RequestSeries) -> RequestFailure {
        transportFailure(sample) ?? (series.succeeds ? .none : .failed)
    }

    /// How a request that got no response failed; `nil` when it got one (its series then says).
    @inline(__always)
    static func transportFailure(_ sample: RequestSample) -> RequestFailure? {
        guard let error = sample.error else { return nil }
        return TransportErrorKind(error).map { .transport($0) } ?? .failed
    }

    /// Writes the request's fields: the numbers (``RequestNumericField``, in its order) as one group,
    /// then the strings. `series` is the sample's: it says whether its status counts as a success.
    func writeFields(of sample: RequestSample, series: RequestSeries, to fields: inout FieldWriter) {
        typealias N = RequestNumericField
        withUnsafeTemporaryAllocation(of: Int64.self, capacity: N.allCases.count) { values in
            var present: UInt32 = 0
            func set(_ field: N, _ value: Int64) {
                values[field.rawValue] = value
                present |= 1 << UInt32(field.rawValue)
            }
            func set(_ field: N, _ duration: Duration?) {
                guard let duration else { return }
                // Whole nanoseconds are millionths of a millisecond; a duration past them (292
                // years) is written at once as its float (and the group then checks each field).
                if let nanoseconds = Self.wholeNanoseconds(duration) {
                    set(field, nanoseconds)
                } else {
                    fields.add(keys.numeric.keys[field.rawValue], duration.milliseconds)
                }
            }
            set(.duration, sample.duration)
            set(.timeToFirstByte, sample.timeToFirstByte)
            set(.domainLookup, sample.domainLookup)
            set(.connect, sample.connect)
            set(.secureConnection, sample.secureConnection)
            set(.requestBytes, Int64(bitPattern: sample.requestBytes))
            set(.responseBytes, Int64(bitPattern: sample.responseBytes))
            if let code = sample.statusCode { set(.statusCode, Int64(code)) }
            let succeeded = !Self.isFailure(sample, series: series)
            set(.success, succeeded ? 1 : 0)
            set(.errors, succeeded ? 0 : 1)
            if let count = sample.redirectCount { set(.redirects, Int64(count)) }
            if let reused = sample.reusedConnection { set(.reusedConnection, reused ? 1 : 0) }
            fields.add(keys.numeric, values: UnsafePointer(values.baseAddress!), present: present)
        }
        if let error = sample.error { fields.add(keys.error, error.description) }
        if let id = sample.correlationID { fields.add(keys.correlationID, id) }
        if let value = sample.networkProtocol { fields.add(keys.networkProtocol, value) }
    }

    /// `duration` in whole nanoseconds (truncated toward zero), or `nil` past `Int64`.
    static func wholeNanoseconds(_ duration: Duration) -> Int64? {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
            // Up to ±9.2 s in attoseconds fit 64 bits, and divide in them.
            if let attoseconds = Int64(exactly: duration.attoseconds) { return attoseconds / 1_000_000_000 }
            return Int64(exactly: duration.attoseconds / 1_000_000_000)
        }
        let (seconds, attoseconds) = duration.components
        let (scaled, overflowed) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, passed) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowed || passed ? nil : sum
    }

    /// The parse-failure point for a response that could not be decoded.
    func parseFailurePoint(_ report: ParseFailureReport) -> Point? {
        let (url, method, module, statusCode) = (report.url, report.method, report.module, report.statusCode)
        guard !isExcluded(url) else { return nil }
        let host = foldedHostTag(url)
        typealias T = PointSchema.Tag
        typealias F = PointSchema.Field
        var fields = [Point.Field(F.count, .int(1)), Point.Field(F.codingPath, .string(report.codingPath))]
        if let statusCode { fields.append(Point.Field(F.statusCode, .int(Int64(statusCode)))) }
        return Point(
            measurement: configuration.parseFailureMeasurement,
            tags: [
                Point.Tag(T.host, host), Point.Tag(T.path, pathTag(host: host, method: method, url: url)),
                Point.Tag(T.method, Self.methodTag(method)), Point.Tag(T.module, module),
                Point.Tag(T.status, statusCode.map(String.init) ?? "error"), Point.Tag(T.failure, report.kind.rawValue),
            ] + everyPointTags,
            fields: fields,
            timestamp: Timestamp(date: report.at)
        )
    }
}
