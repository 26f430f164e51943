import LineProtocol

/// What "healthy" means for the APIs a service calls: an availability objective (the share of requests
/// that succeed, by the ``SuccessRule``s) and a latency objective (the share of requests within a
/// threshold), a default for every endpoint and overrides for some.
///
/// ```swift
/// configuration.objectives = ObjectiveOptions(
///     default: Objective(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300))),
///     overrides: [.init(host: "api.stripe.com", path: "/v1/charges", objective: Objective(availability: 0.9995))]
/// )
/// ```
///
/// The objectives travel on the interval points (``PointSchema/objectiveIntervalFields``): each point
/// carries its endpoint's objective and the requests within its latency threshold, counted when they are
/// recorded. So one shipped rule set serves every endpoint with its own objective, and changing an
/// objective needs no rule change. An objective that cannot be met or expressed (100 %, 0, above 1, a
/// threshold of zero or less) is an error at start.
public struct ObjectiveOptions: Sendable, Hashable {
    /// An endpoint's objectives; either may be absent.
    public struct Objective: Sendable, Hashable {
        /// The share of requests that must succeed over the budget's window (0.999 is 99.9 %); `nil` for
        /// no availability objective.
        public var availability: Double?
        /// The share of requests that must take at most a threshold; `nil` for no latency objective.
        public var latency: LatencyObjective?

        /// An objective of `availability` and `latency`.
        ///
        /// - Parameters:
        ///   - availability: The share of requests that must succeed, above 0 and below 1.
        ///   - latency: The latency objective.
        public init(availability: Double? = nil, latency: LatencyObjective? = nil) {
            self.availability = availability
            self.latency = latency
        }

        /// Whether it sets nothing.
        var isEmpty: Bool { availability == nil && latency == nil }
    }

    /// A share of requests that must take at most a threshold: `target` 0.99 within 300 ms.
    public struct LatencyObjective: Sendable, Hashable {
        /// The share of requests, above 0 and below 1.
        public var target: Double
        /// The threshold, above zero.
        public var threshold: Duration

        /// `target` of the requests within `threshold`.
        ///
        /// - Parameters:
        ///   - target: The share of requests, above 0 and below 1.
        ///   - threshold: The longest a request may take to count as fast enough.
        public init(target: Double, threshold: Duration) {
            self.target = target
            self.threshold = threshold
        }
    }

    /// The objective of the endpoints an override names.
    public struct Override: Sendable, Hashable {
        /// The host: `api.example.com` (any port), `api.example.com:8443` or `*.example.com`; `nil` for every host.
        public var host: String?
        /// The templated path as it is tagged (`/users/{id}`; `*` one segment, `**` the rest); `nil` for every path.
        public var path: String?
        /// The method (`GET`); `nil` for every method.
        public var method: String?
        /// The module (the `module` tag); `nil` for every module.
        public var module: String?
        /// The objective of the endpoints it names, in place of the default (an absent part is absent).
        public var objective: Objective

        /// An override for the endpoints `host`, `path`, `method` and `module` name.
        ///
        /// - Parameters:
        ///   - host: The host; `nil` for every host.
        ///   - path: The path template; `nil` for every path.
        ///   - method: The method; `nil` for every method.
        ///   - module: The module; `nil` for every module.
        ///   - objective: Their objective.
        public init(
            host: String? = nil,
            path: String? = nil,
            method: String? = nil,
            module: String? = nil,
            objective: Objective
        ) {
            self.host = host
            self.path = path
            self.method = method
            self.module = module
            self.objective = objective
        }
    }

    /// Every endpoint's objective, unless an override names it. Default: none.
    public var `default`: Objective
    /// Objectives for some endpoints: the first that names an endpoint decides its objective.
    public var overrides: [Override]

    /// Objectives: `default` for every endpoint, `overrides` for some.
    ///
    /// - Parameters:
    ///   - default: Every endpoint's objective, unless an override names it.
    ///   - overrides: The first that names an endpoint decides.
    public init(default: Objective = Objective(), overrides: [Override] = []) {
        self.default = `default`
        self.overrides = overrides
    }

    /// Whether no endpoint has an objective.
    var isEmpty: Bool { self.default.isEmpty && overrides.allSatisfy { $0.objective.isEmpty } }

    /// Why the objectives cannot be used, if they cannot.
    func problem() -> String? {
        for (index, objective) in ([self.default] + overrides.map(\.objective)).enumerated() {
            let name = index == 0 ? "the default" : "override \(index)"
            if let availability = objective.availability, !(availability > 0 && availability < 1) {
                return "\(name): availability \(availability) must be above 0 and below 1 (100 % leaves no budget)"
            }
            if let latency = objective.latency {
                if !(latency.target > 0 && latency.target < 1) {
                    return "\(name): latency target \(latency.target) must be above 0 and below 1"
                }
                if latency.threshold <= .zero || RequestSchema.wholeNanoseconds(latency.threshold) == nil {
                    return "\(name): latency threshold \(latency.threshold) must be above zero"
                }
            }
        }
        for (index, override) in overrides.enumerated() {
            if let host = override.host, HostPattern(host) == nil {
                return "override \(index + 1): host \"\(host)\" is not a host name, host:port or *.domain"
            }
            if let path = override.path, !path.hasPrefix("/") {
                return "override \(index + 1): path \"\(path)\" does not start with /"
            }
        }
        return nil
    }
}

/// An endpoint's objective as the record path uses it: found once, when its aggregate is made.
struct EndpointObjective: Sendable {
    let availability: Double?
    let latencyTarget: Double?
    /// Requests at or below it count as within the latency objective; below zero for none.
    let latencyThreshold: Int64

    /// No objective: nothing is written, nothing is counted.
    static let none = EndpointObjective(availability: nil, latencyTarget: nil, latencyThreshold: -1)

    /// The objective of the endpoint `tags` (an interval point's, sorted by key) name among `options`.
    init(_ options: ObjectiveOptions, tags: [Point.Tag]) {
        func tag(_ key: String) -> String? { tags.first { $0.key == key }?.value }
        let host = tag(PointSchema.Tag.host) ?? ""
        let path = tag(PointSchema.Tag.path) ?? ""
        let method = tag(PointSchema.Tag.method) ?? ""
        let module = tag(PointSchema.Tag.module) ?? ""
        let objective =
            options.overrides.first { override in
                if let wanted = override.method, wanted.uppercased() != method { return false }
                if let wanted = override.module, wanted != module { return false }
                if let wanted = override.host {
                    guard let pattern = HostPattern(wanted), Self.matches(pattern, hostTag: host) else { return false }
                }
                if let wanted = override.path {
                    let pattern = wanted.split(separator: "/", omittingEmptySubsequences: true)
                    let segments = path.split(separator: "/", omittingEmptySubsequences: true)
                    guard SuccessPolicy.matches(pattern[...], segments[...]) else { return false }
                }
                return true
            }?.objective ?? options.default
        self.init(
            availability: objective.availability,
            latencyTarget: objective.latency?.target,
            latencyThreshold: objective.latency.flatMap { RequestSchema.wholeNanoseconds($0.threshold) } ?? -1
        )
    }

    private init(availability: Double?, latencyTarget: Double?, latencyThreshold: Int64) {
        self.availability = availability
        self.latencyTarget = latencyTarget
        self.latencyThreshold = latencyThreshold
    }

    /// Whether `pattern` names the host of a `host` tag (`host`, `host:port`, `[v6]:port`).
    private static func matches(_ pattern: HostPattern, hostTag: String) -> Bool {
        var name = Substring(hostTag)
        var port: Int?
        if name.hasPrefix("["), let close = name.firstIndex(of: "]") {
            port = Int(name[name.index(after: close)...].dropFirst())
            name = name[name.index(after: name.startIndex)..<close]
        } else if name.filter({ $0 == ":" }).count == 1, let colon = name.lastIndex(of: ":") {
            port = Int(name[name.index(after: colon)...])
            name = name[..<colon]
        }
        return pattern.matches(host: String(name), port: port)
    }
}
