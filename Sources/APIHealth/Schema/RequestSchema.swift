import Foundation
import LineProtocol

/// Turns samples into points: templated, capped paths and the documented tags and fields.
final class RequestSchema: Sendable {
    private let configuration: APIHealthConfiguration
    private let templater: PathTemplater
    private let learner: EndpointLearner
    private let excludedHosts: Set<String>
    /// Rendered series by URL, method, module and status: parsing a URL, templating its path and
    /// rendering the tags is most of the cost of a sample, and services call the same URLs again and
    /// again. Cleared when it grows past 4,096, and when the learner learns a position (which changes
    /// the templates of some URLs once).
    private let rendered = Locked((learned: UInt64(0), series: [URL: [RequestSeries]]()))
    private static let statusClasses = (0...9).map { "\($0)xx" }
    private static let knownMethods: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT"]

    init(configuration: APIHealthConfiguration) {
        self.configuration = configuration
        self.templater = PathTemplater(rules: configuration.capture.pathRules)
        self.learner = EndpointLearner(
            threshold: configuration.capture.learningThreshold,
            maximumTemplates: configuration.capture.maximumDistinctPaths,
            overflowPath: configuration.capture.overflowPath)
        var excluded = Set(configuration.capture.excludedHosts.map { $0.lowercased() })
        // The destination is excluded by host and port, so other services on its host are still seen.
        if let destination = configuration.destination { excluded.insert(Self.hostTag(destination.url)) }
        self.excludedHosts = excluded
    }

    var pathsOverflowed: UInt64 { learner.overflowed }

    /// `host` or `host:port`, lowercased.
    static func hostTag(_ url: URL) -> String {
        let host = url.host?.lowercased() ?? "unknown"
        return url.port.map { "\(host):\($0)" } ?? host
    }

    func isExcluded(_ url: URL) -> Bool {
        guard let host = url.host?.lowercased() else { return true }
        return excludedHosts.contains(host) || excludedHosts.contains(Self.hostTag(url))
    }

    /// The templated path (a user rule's, else a learned one), or the overflow value once the cap of
    /// distinct paths is reached.
    func pathTag(host: String, method: String, url: URL) -> String {
        let segments = url.path.split(separator: "/", omittingEmptySubsequences: true)
        if let ruled = templater.ruleTemplate(host: host, segments: segments) {
            return learner.admit(host: host, template: ruled)
        }
        return learner.template(host: host, method: Self.methodTag(method), segments: segments)
    }

    static func methodTag(_ method: String) -> String {
        let upper = method.uppercased()
        return knownMethods.contains(upper) ? upper : "OTHER"
    }

    /// The rendered series of `sample`: `nil` for an excluded host, a failure when the configured
    /// measurement cannot be written.
    func series(for sample: RequestSample) -> Result<RequestSeries, LineProtocolError>? {
        let learned = learner.positionsLearned
        let cached = rendered.withLock { cache -> RequestSeries? in
            if cache.learned != learned {
                cache.series.removeAll(keepingCapacity: true)
                cache.learned = learned
                return nil
            }
            return cache.series[sample.url]?.first(where: { $0.isSeries(of: sample) })
        }
        if let cached { return .success(cached) }
        guard !isExcluded(sample.url) else { return nil }
        let host = Self.hostTag(sample.url)
        let path = pathTag(host: host, method: sample.method, url: sample.url)
        let series: RequestSeries
        do {
            series = RequestSeries(
                try SeriesKey(measurement: configuration.measurement, tags: tags(for: sample, host: host, path: path)),
                method: sample.method, module: sample.module, statusCode: sample.statusCode)
        } catch {
            return .failure(error)
        }
        // An overflowed path is not cached: it is counted each time.
        if path != configuration.capture.overflowPath {
            rendered.withLock { cache in
                guard cache.learned == learned else { return }
                if cache.series.count >= 4_096 { cache.series.removeAll(keepingCapacity: true) }
                var variants = cache.series[sample.url] ?? []
                if variants.count >= 64 { variants.removeAll() }
                variants.append(series)
                cache.series[sample.url] = variants
            }
        }
        return .success(series)
    }

    private func tags(for sample: RequestSample, host: String, path: String) -> [Point.Tag] {
        typealias T = PointSchema.Tag
        return [
            Point.Tag(T.host, host), Point.Tag(T.path, path),
            Point.Tag(T.method, Self.methodTag(sample.method)), Point.Tag(T.module, sample.module),
            Point.Tag(T.status, sample.statusCode.map(String.init) ?? "error"),
            Point.Tag(T.statusClass, sample.statusCode.map { Self.statusClasses[min(max($0 / 100, 0), 9)] } ?? "error"),
        ]
    }

    /// Appends the request's fields, in the documented order.
    func appendFields(of sample: RequestSample, to fields: inout [Point.Field]) {
        typealias F = PointSchema.Field
        fields.append(Point.Field(F.durationMilliseconds, .float(sample.duration.milliseconds)))
        if let value = sample.timeToFirstByte { fields.append(Point.Field(F.timeToFirstByteMilliseconds, .float(value.milliseconds))) }
        if let value = sample.domainLookup { fields.append(Point.Field(F.domainLookupMilliseconds, .float(value.milliseconds))) }
        if let value = sample.connect { fields.append(Point.Field(F.connectMilliseconds, .float(value.milliseconds))) }
        if let value = sample.secureConnection { fields.append(Point.Field(F.secureConnectionMilliseconds, .float(value.milliseconds))) }
        fields.append(Point.Field(F.requestBytes, .uint(sample.requestBytes)))
        fields.append(Point.Field(F.responseBytes, .uint(sample.responseBytes)))
        if let code = sample.statusCode { fields.append(Point.Field(F.statusCode, .int(Int64(code)))) }
        let succeeded = sample.error == nil && (sample.statusCode ?? 600) < 400
        fields.append(Point.Field(F.success, .bool(succeeded)))
        fields.append(Point.Field(F.errors, .int(succeeded ? 0 : 1)))
        if let error = sample.error { fields.append(Point.Field(F.error, .string(error.description))) }
        if let id = sample.correlationID { fields.append(Point.Field(F.correlationID, .string(id))) }
        if let count = sample.redirectCount { fields.append(Point.Field(F.redirects, .int(Int64(count)))) }
        if let value = sample.networkProtocol { fields.append(Point.Field(F.networkProtocol, .string(value))) }
        if let value = sample.reusedConnection { fields.append(Point.Field(F.reusedConnection, .bool(value))) }
    }

    /// The parse-failure point for a response that could not be decoded.
    func parseFailurePoint(
        url: URL, method: String, module: String, statusCode: Int?, kind: ParseFailureKind, codingPath: String, at date: Date
    ) -> Point? {
        guard !isExcluded(url) else { return nil }
        let host = Self.hostTag(url)
        typealias T = PointSchema.Tag
        typealias F = PointSchema.Field
        var fields = [Point.Field(F.count, .int(1)), Point.Field(F.codingPath, .string(codingPath))]
        if let statusCode { fields.append(Point.Field(F.statusCode, .int(Int64(statusCode)))) }
        return Point(
            measurement: configuration.parseFailureMeasurement,
            tags: [
                Point.Tag(T.host, host), Point.Tag(T.path, pathTag(host: host, method: method, url: url)),
                Point.Tag(T.method, Self.methodTag(method)), Point.Tag(T.module, module),
                Point.Tag(T.status, statusCode.map(String.init) ?? "error"), Point.Tag(T.failure, kind.rawValue),
            ],
            fields: fields,
            timestamp: Timestamp(date: date))
    }
}

/// A request series rendered once (measurement and tags, escaped and sorted), with the identity
/// timestamp de-duplication knows it by, and the parts of a sample besides its URL it stands for.
struct RequestSeries: Sendable {
    let key: SeriesKey
    let id: Int
    let method: String
    let module: String
    let statusCode: Int?

    init(_ key: SeriesKey, method: String, module: String, statusCode: Int?) {
        self.key = key
        self.id = key.bytes.withUnsafeBufferPointer(RecentInstants.seriesID)
        self.method = method
        self.module = module
        self.statusCode = statusCode
    }

    /// Whether `sample` (whose URL it was rendered for) belongs to this series.
    func isSeries(of sample: RequestSample) -> Bool {
        statusCode == sample.statusCode && method == sample.method && module == sample.module
    }
}

extension Timestamp {
    /// The instant of `date`, to the microsecond `Date` carries.
    public init(date: Date) {
        let interval = date.timeIntervalSince1970
        let seconds = interval.rounded(.down)
        self.init(seconds: Int64(seconds), nanoseconds: Int64(((interval - seconds) * 1e9).rounded()))
    }
}
