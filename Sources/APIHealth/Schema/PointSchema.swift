import Foundation

/// The names of every measurement, tag and field the agent writes. Dashboards depend on them; the
/// dashboard contract test reads them from here.
///
/// ```swift
/// PointSchema.requestFields.contains(PointSchema.Field.durationMilliseconds)  // true
/// ```
public enum PointSchema {
    /// The default measurement names (``APIHealthConfiguration`` can rename each).
    public enum Measurement {
        /// One point per request (``APIHealthConfiguration/CaptureOptions/rawPoints`` says which).
        public static let request = "apihealth_request"
        /// One point per response that could not be decoded.
        public static let parseFailure = "apihealth_parse_failure"
        /// The agent's own health, every ``APIHealthConfiguration/selfMetricsInterval`` and at shutdown.
        public static let agent = "apihealth_agent"
        /// One point per endpoint and interval (see ``AggregationOptions``).
        public static let requestInterval = "apihealth_request_interval"
        /// The health of an `apihealth-relay`, written through its own agent beside that agent's
        /// ``agent`` point ("A relay for app installs").
        public static let relay = "apihealth_relay"
    }

    /// Tag keys.
    public enum Tag {
        /// The host, with the port when the URL has one.
        public static let host = "host"
        /// The templated path (`/users/{id}`), or ``APIHealthConfiguration/CaptureOptions/overflowPath`` past the cap.
        public static let path = "path"
        /// The HTTP method: `GET`, `POST`, … (`OTHER` for anything else).
        public static let method = "method"
        /// The part of the service that made the call, as given to `instrument` or in the sample.
        public static let module = "module"
        /// The HTTP status code, or `error` for a transport failure.
        public static let status = "status"
        /// `2xx` … `5xx`, or `error` for a transport failure.
        public static let statusClass = "status_class"
        /// Why a response could not be decoded: a ``ParseFailureKind``.
        public static let failure = "failure"
        /// The service's name (``APIHealthConfiguration/serviceName``), on every point.
        public static let service = "service"
        /// Which replica wrote the point (``APIHealthConfiguration/instance``), on every point.
        public static let instance = "instance"
        /// The ISO 3166-1 alpha-2 country the requests were made from (``APIHealthConfiguration/country``), a
        /// global tag: configured, learned from a response header, or the device's region.
        public static let country = "country"
        /// The version of the app an install runs (``APIHealthConfiguration/appVersion``), on every point
        /// when set.
        public static let appVersion = "app_version"
    }

    /// Tag keys the agent writes itself: ``APIHealthConfiguration/globalTags`` cannot use them.
    public static let reservedTags: Set<String> = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.statusClass, Tag.failure, Tag.service,
        Tag.instance, "metric_type",
    ]

    /// Fields of interval points (``Measurement/requestInterval``): sums over the interval, not running
    /// totals, so a time range or a fleet is the sum of its points. The duration histogram has one field per
    /// bucket bound, cumulative over the bounds (`le_300` counts the requests of at most 300 ms), and
    /// `le_inf` (all of them).
    ///
    /// ```swift
    /// PointSchema.IntervalField.bucket(milliseconds: 300)  // "le_300"
    /// ```
    public enum IntervalField {
        /// Requests in the interval, but for those that failed on the device itself (``deviceErrors``) or were
        /// cancelled (``cancelled``): those never reached a verdict on the API.
        public static let count = "count"
        /// Failed requests in the interval (a transport error or a status of 400 or more), but for the device's own
        /// failures and cancellations.
        public static let errors = "errors"
        /// The sum of the durations, in milliseconds.
        public static let durationSum = "duration_ms_sum"
        /// The shortest duration, in milliseconds.
        public static let durationMinimum = "duration_ms_min"
        /// The longest duration, in milliseconds.
        public static let durationMaximum = "duration_ms_max"
        /// Request body bytes sent in the interval.
        public static let requestBytes = "request_bytes"
        /// Response body bytes received in the interval.
        public static let responseBytes = "response_bytes"
        /// The bucket above every bound: every request of the interval.
        public static let bucketInfinity = "le_inf"
        /// The endpoint's availability objective, as a share of requests (0.999), on every interval point of
        /// an endpoint with one (``APIHealthConfiguration/objectives``): burn-rate alerts divide the error share
        /// by `1 - objective`.
        public static let objectiveAvailability = "objective_availability"
        /// The endpoint's latency objective, as a share of requests within ``objectiveLatencyMilliseconds`` (0.99).
        public static let objectiveLatency = "objective_latency"
        /// The latency objective's threshold, in milliseconds.
        public static let objectiveLatencyMilliseconds = "objective_latency_ms"
        /// Requests of the interval that took at most ``objectiveLatencyMilliseconds``: the good events of the
        /// latency objective, counted at record time, so they never depend on which bucket bounds exist.
        public static let requestsWithinLatencyObjective = "requests_within_latency_objective"
        /// Transport errors of the interval that failed looking up the host's name (on `status_class=error` points).
        public static let dnsErrors = "errors_dns"
        /// Transport errors of the interval that failed to connect: refused, unreachable, no network, the
        /// connection lost.
        public static let connectErrors = "errors_connect"
        /// Transport errors of the interval that failed the TLS handshake or the server's certificate.
        public static let tlsErrors = "errors_tls"
        /// Transport errors of the interval that timed out.
        public static let timeoutErrors = "errors_timeout"
        /// Requests of the interval that failed on the device: no internet connection, roaming off, data not allowed
        /// (on `status_class=error` points). Not in ``count`` or ``errors``: the API was never asked, so neither
        /// availability, burn rates nor reachability count them.
        public static let deviceErrors = "errors_device"
        /// Requests of the interval their caller cancelled (on `status_class=error` points). Not in ``count`` or
        /// ``errors``.
        public static let cancelled = "cancelled"
        /// Responses of the interval a cache may store: a method and status a cache keeps (GET, 200…), or a
        /// stated lifetime, and no `no-store` (cache advice, ``APIHealthConfiguration/CaptureOptions/cacheAdvice``).
        public static let cacheStorable = "cache_storable"
        /// Responses of the interval sent with `Cache-Control: no-store` (cache advice).
        public static let cacheNoStore = "cache_no_store"
        /// Responses of the interval with a lifetime above zero: stated (`max-age`, or `Expires` after `Date` or
        /// after the time received), or a heuristic one a client cache applies (a tenth of the time since
        /// `Last-Modified`)
        /// (cache advice).
        public static let cacheWithLifetime = "cache_with_lifetime"
        /// 304 responses of the interval: a conditional request confirmed what a cache held (cache advice).
        public static let cacheRevalidated = "cache_revalidated"
        /// Responses of the interval a local cache served, where the platform says so (Apple platforms'
        /// task metrics; URLSession on Linux never captures a response its cache served) (cache advice).
        public static let cacheServedLocally = "cache_served_locally"
        /// Responses of the interval the advisor judged: a response a cache could keep (GET or HEAD, a status
        /// cacheable by default or a stated lifetime), its body read to its end, that came over the network (not
        /// a local cache's) and was not in flight beside an earlier request of its key. The shares of the
        /// `cache_hits_le_<s>` and `cache_stale_le_<s>` fields are over these (cache advice).
        public static let cacheJudged = "cache_judged"
        /// Responses of the interval that are one user's: a request with `Authorization` (without `public`,
        /// `s-maxage` or `must-revalidate` in the response) or `Cookie`, or a response with `private`,
        /// `Set-Cookie` or `Vary` naming `*`, `Authorization` or `Cookie`. Only the client's own cache may
        /// keep them, never a shared one (cache advice).
        public static let cachePrivateOnly = "cache_private_only"
        /// Requests of the interval that started before the previous request of their key had ended: no
        /// lifetime would have served them, coalescing the duplicates would (cache advice).
        public static let cacheCoalescable = "cache_coalescable"
        /// The waiting, in milliseconds, of the requests ``cacheCoalescable`` counts (cache advice).
        public static let cacheCoalescableMilliseconds = "cache_coalescable_ms"
        /// The candidate lifetimes, in seconds, a private cache is simulated at: one simulation each, the
        /// `cache_hits_le_<seconds>` and `cache_stale_le_<seconds>` fields.
        public static let cacheAgeBounds: [Int64] = [1, 10, 60, 300, 3_600]
        /// Judged responses a private cache with a lifetime (`max-age`) of `seconds` would have served from
        /// its copy while it was fresh (RFC 9111 section 4.2: its age, `Age` included, below the lifetime),
        /// the copy identical to the body the server sent (`cache_hits_le_60`). Each lifetime is a
        /// simulation of its own: these are not cumulative buckets.
        ///
        /// - Parameter seconds: One of ``cacheAgeBounds``.
        /// - Returns: The field's name.
        public static func cacheHits(lifetime seconds: Int64) -> String { "cache_hits_le_\(seconds)" }
        /// The waiting, in milliseconds, of the responses ``cacheHits(lifetime:)`` counts: what that
        /// lifetime would have saved (`cache_hits_ms_le_60`).
        ///
        /// - Parameter seconds: One of ``cacheAgeBounds``.
        /// - Returns: The field's name.
        public static func cacheHitsMilliseconds(lifetime seconds: Int64) -> String { "cache_hits_ms_le_\(seconds)" }
        /// Judged responses a private cache with a lifetime of `seconds` would have served from a fresh copy
        /// while the server's body had changed: the cost of that lifetime (`cache_stale_le_60`).
        ///
        /// - Parameter seconds: One of ``cacheAgeBounds``.
        /// - Returns: The field's name.
        public static func cacheStale(lifetime seconds: Int64) -> String { "cache_stale_le_\(seconds)" }
        /// The field of the bucket bound `milliseconds`: `le_300`, `le_2.5`.
        ///
        /// - Parameter milliseconds: The bucket's upper bound, in milliseconds.
        /// - Returns: The field's name.
        public static func bucket(milliseconds: Double) -> String {
            if milliseconds == milliseconds.rounded(), abs(milliseconds) < 1e15 { return "le_\(Int64(milliseconds))" }
            var text = String(milliseconds)
            if text.contains("e") { text = String(format: "%.6f", milliseconds) }
            return "le_" + text
        }
    }

    /// Fields of request points and parse-failure points.
    public enum Field {
        /// From the start of the request to the end of the response body (or the error).
        public static let durationMilliseconds = "duration_ms"
        /// From the start of the request to the response head, where the platform reports it.
        public static let timeToFirstByteMilliseconds = "ttfb_ms"
        /// The DNS lookup, where the platform reports it (Apple task metrics).
        public static let domainLookupMilliseconds = "dns_ms"
        /// The TCP connect, where the platform reports it (Apple task metrics).
        public static let connectMilliseconds = "connect_ms"
        /// The TLS handshake, where the platform reports it (Apple task metrics).
        public static let secureConnectionMilliseconds = "tls_ms"
        /// Request body bytes sent (unsigned; an integer with the v1 API).
        public static let requestBytes = "request_bytes"
        /// Response body bytes received (unsigned; an integer with the v1 API).
        public static let responseBytes = "response_bytes"
        /// The HTTP status code, absent for a transport failure.
        public static let statusCode = "status_code"
        /// No transport error and a status below 400.
        public static let success = "success"
        /// 1 for a failed request (transport error, or a status ≥ 400 unless a ``SuccessRule`` says otherwise),
        /// 0 otherwise: averages into an error ratio.
        public static let errors = "errors"
        /// The transport error as `domain code` (`NSURLErrorDomain -1001`).
        public static let error = "error"
        /// The first configured correlation header of the request, else of the response.
        public static let correlationID = "correlation_id"
        /// Redirects followed, where the platform reports them.
        public static let redirects = "redirects"
        /// `http/1.1`, `h2`, `h3`, where the platform reports it.
        public static let networkProtocol = "protocol"
        /// Whether the connection was reused, where the platform reports it.
        public static let reusedConnection = "reused_connection"
        /// Always 1 on a parse-failure point, so sums count failures.
        public static let count = "count"
        /// Where decoding failed, as `items[2].price`, on a parse-failure point.
        public static let codingPath = "coding_path"
    }

    /// Agent self-metrics fields.
    public enum AgentField {
        /// Points taken into a batch.
        public static let pointsRecorded = "points_recorded"
        /// Points refused because they cannot be written as line protocol.
        public static let pointsInvalid = "points_invalid"
        /// Points written with a repair (a field or tag left out, a name or string changed).
        public static let pointsRepaired = "points_repaired"
        /// Points a destination acknowledged.
        public static let pointsWritten = "points_written"
        /// Points dropped past a pending cap, or for want of a free timestamp.
        public static let pointsDropped = "points_dropped"
        /// Points a server refused for good (400, 422), kept in the spool's `rejected/`.
        public static let pointsRejected = "points_rejected"
        /// Points of batches still failing after ``RetryPolicy/maximumRetryDuration``, set aside.
        public static let pointsExpired = "points_expired"
        /// Write requests retried.
        public static let retries = "retries"
        /// Batches a destination acknowledged.
        public static let batchesWritten = "batches_written"
        /// Line protocol bytes sent, before compression.
        public static let bytesBeforeGzip = "bytes_before_gzip"
        /// Body bytes sent, after compression.
        public static let bytesAfterGzip = "bytes_after_gzip"
        /// Lines not yet acknowledged.
        public static let pendingLines = "pending_lines"
        /// Bytes of line protocol not yet acknowledged (before gzip).
        public static let pendingBytes = "pending_bytes"
        /// Requests whose path was recorded as the overflow path, past the cap of distinct paths.
        public static let pathsOverflowed = "paths_overflowed"
        /// Requests an instrumented session made that the hook let through unrecorded.
        public static let requestsUncaptured = "requests_uncaptured"
        /// Requests the capture filter dropped (a choice, not a loss).
        public static let requestsFiltered = "requests_filtered"
        /// Points neither delivered nor kept in the spool (a full disk, no spool).
        public static let pointsLost = "points_lost"
        /// swift-metrics handlers made past the backend's cap, sent to its overflow series.
        public static let metricsOverflowed = "metrics_overflowed"
        /// The last error a destination answered or a write failed with.
        public static let lastError = "last_error"
        /// Interval points recorded.
        public static let intervalPoints = "interval_points"
        /// Requests counted only in their interval point, by ``APIHealthConfiguration/CaptureOptions/rawPoints``.
        public static let requestsOnlyAggregated = "requests_only_aggregated"
        /// The cap on endpoint aggregates (``AggregationOptions/maximumEndpoints``).
        public static let endpointLimit = "endpoint_limit"
        /// Endpoint aggregates held.
        public static let endpoints = "endpoints"
        /// Requests counted in the overflow series, past the endpoint cap.
        public static let requestsOverflowed = "requests_overflowed"
        /// Endpoint aggregates evicted for being idle.
        public static let endpointsEvicted = "endpoints_evicted"
        /// Keys the cache advisor evicted to stay within its bound (only with cache advice).
        public static let cacheKeysEvicted = "cache_keys_evicted"
        /// Values of the country header that were not country codes (``APIHealthConfiguration/CaptureOptions/countryHeader``).
        public static let countryValuesIgnored = "country_values_ignored"
        /// The offset the device's clock is corrected by, in milliseconds, once `Date` headers agree
        /// (``APIHealthConfiguration/correctsClock``).
        public static let clockOffset = "clock_offset_ms"
        /// How far true time may be from the corrected clock, in milliseconds: half the range the `Date`
        /// headers agree on (``AgentMetrics/clockOffsetUncertainty``).
        public static let clockOffsetUncertainty = "clock_offset_uncertainty_ms"
        /// `Date` headers that were no reading of the clock (``APIHealthConfiguration/correctsClock``).
        public static let clockReadingsIgnored = "clock_readings_ignored"
        /// Points that went out with the device's own time: recorded before readings agreed on an offset and
        /// not moved to true time once they did (``AgentMetrics/pointsOnDeviceClock``).
        public static let pointsOnDeviceClock = "points_device_clock"
    }

    /// Fields of the relay's health points (``Measurement/relay``): running totals since the relay started,
    /// but for ``linesPending`` and ``clients``.
    public enum RelayField {
        /// Write requests answered.
        public static let requests = "requests"
        /// Lines taken and handed to the relay's agent to forward.
        public static let linesAccepted = "lines_accepted"
        /// Lines refused for a reason of their own (the sum of the line reasons' ``refused(_:)`` fields).
        public static let linesRefused = "lines_refused"
        /// Write requests answered 429.
        public static let requestsThrottled = "requests_throttled"
        /// Lines the relay's agent has forwarded (a destination acknowledged them).
        public static let linesForwarded = "lines_forwarded"
        /// Lines taken and not yet forwarded.
        public static let linesPending = "lines_pending"
        /// Client addresses whose rate the relay keeps now.
        public static let clients = "clients"
        /// Clients that gave up their place in the relay's table to newer ones.
        public static let clientsEvicted = "clients_evicted"
        /// The reasons a line is refused for on its own, as its answer names them.
        public static let lineRefusalReasons = [
            "unparsable", "measurement", "tag", "tag_value", "service", "place", "version", "field", "field_type",
            "timestamp", "series_limit",
        ]
        /// The reasons a whole write is refused for (its lines counted, or the request for a 401 or 413).
        public static let writeRefusalReasons = ["key", "body_too_large", "body", "throttled"]
        /// Lines (or writes) refused for `reason`, one of ``lineRefusalReasons`` or ``writeRefusalReasons``:
        /// `refused_field_type`.
        ///
        /// - Parameter reason: The reason, as the relay's answers name it.
        /// - Returns: The field's name.
        public static func refused(_ reason: String) -> String { "refused_" + reason }
    }

    /// Tags of request points (beside the global tags).
    public static let requestTags = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.statusClass, Tag.service, Tag.instance,
    ]
    /// Fields of request points; each point carries those that apply.
    public static let requestFields = [
        Field.durationMilliseconds, Field.timeToFirstByteMilliseconds, Field.domainLookupMilliseconds,
        Field.connectMilliseconds, Field.secureConnectionMilliseconds, Field.requestBytes, Field.responseBytes,
        Field.statusCode, Field.success, Field.errors, Field.error, Field.correlationID, Field.redirects,
        Field.networkProtocol,
        Field.reusedConnection,
    ]
    /// Tags of parse-failure points (beside the global tags).
    public static let parseFailureTags = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.failure, Tag.service, Tag.instance,
    ]
    /// Fields of parse-failure points.
    public static let parseFailureFields = [Field.count, Field.codingPath, Field.statusCode]
    /// Tags of the agent's own health points (beside the global tags).
    public static let agentTags = [Tag.service, Tag.instance]
    /// Tags of interval points (beside the global tags).
    public static let intervalTags = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.statusClass, Tag.service, Tag.instance,
    ]
    /// Fields of interval points with the default bucket bounds.
    public static let intervalFields =
        [
            IntervalField.count, IntervalField.errors, IntervalField.durationSum, IntervalField.durationMinimum,
            IntervalField.durationMaximum, IntervalField.requestBytes, IntervalField.responseBytes,
        ] + AggregationOptions.defaultDurationBoundaries.map { IntervalField.bucket(milliseconds: $0.milliseconds) }
        + [IntervalField.bucketInfinity]
    /// Fields an interval point carries when its endpoint has an objective (``APIHealthConfiguration/objectives``).
    public static let objectiveIntervalFields = [
        IntervalField.objectiveAvailability, IntervalField.objectiveLatency, IntervalField.objectiveLatencyMilliseconds,
        IntervalField.requestsWithinLatencyObjective,
    ]
    /// Fields an interval point of transport errors (`status_class=error`) carries for the kinds of error
    /// seen in it (each only when some were): what the reachability alerts name as the failing kind, then the
    /// device's own failures and cancellations, counted apart.
    public static let transportErrorIntervalFields = [
        IntervalField.dnsErrors, IntervalField.connectErrors, IntervalField.tlsErrors, IntervalField.timeoutErrors,
        IntervalField.deviceErrors, IntervalField.cancelled,
    ]
    /// Fields every interval point carries when the agent gives cache advice
    /// (``APIHealthConfiguration/CaptureOptions/cacheAdvice``), in the order they are written.
    public static let cacheIntervalFields =
        [
            IntervalField.cacheStorable, IntervalField.cacheNoStore, IntervalField.cacheWithLifetime,
            IntervalField.cacheRevalidated, IntervalField.cacheServedLocally, IntervalField.cacheJudged,
            IntervalField.cachePrivateOnly, IntervalField.cacheCoalescable, IntervalField.cacheCoalescableMilliseconds,
        ] + IntervalField.cacheAgeBounds.map(IntervalField.cacheHits(lifetime:))
        + IntervalField.cacheAgeBounds.map(IntervalField.cacheHitsMilliseconds(lifetime:))
        + IntervalField.cacheAgeBounds.map(IntervalField.cacheStale(lifetime:))
    /// Fields of the agent's own health points.
    public static let agentFields = [
        AgentField.pointsRecorded, AgentField.pointsInvalid, AgentField.pointsRepaired, AgentField.pointsWritten,
        AgentField.pointsDropped, AgentField.pointsRejected, AgentField.pointsExpired, AgentField.retries,
        AgentField.batchesWritten, AgentField.bytesBeforeGzip, AgentField.bytesAfterGzip, AgentField.pendingLines,
        AgentField.pendingBytes, AgentField.pathsOverflowed, AgentField.requestsUncaptured, AgentField.pointsLost,
        AgentField.metricsOverflowed, AgentField.lastError, AgentField.intervalPoints,
        AgentField.requestsOnlyAggregated, AgentField.requestsFiltered, AgentField.endpointLimit,
        AgentField.endpoints, AgentField.requestsOverflowed, AgentField.endpointsEvicted, AgentField.cacheKeysEvicted,
        AgentField.countryValuesIgnored, AgentField.clockOffset, AgentField.clockOffsetUncertainty,
        AgentField.clockReadingsIgnored, AgentField.pointsOnDeviceClock,
    ]
    /// Tags of the relay's health points (beside the global tags).
    public static let relayTags = [Tag.service, Tag.instance]
    /// Fields of the relay's health points, in the order it writes them.
    public static let relayFields =
        [RelayField.requests, RelayField.linesAccepted, RelayField.linesRefused, RelayField.requestsThrottled]
        + (RelayField.lineRefusalReasons + RelayField.writeRefusalReasons).map(RelayField.refused)
        + [RelayField.linesForwarded, RelayField.linesPending, RelayField.clients, RelayField.clientsEvicted]
}
