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
        public static let request = "apihealth_request"
        public static let parseFailure = "apihealth_parse_failure"
        public static let agent = "apihealth_agent"
        /// One point per endpoint and interval (see ``AggregationOptions``).
        public static let requestInterval = "apihealth_request_interval"
    }

    public enum Tag {
        public static let host = "host"
        public static let path = "path"
        public static let method = "method"
        public static let module = "module"
        public static let status = "status"
        public static let statusClass = "status_class"
        public static let failure = "failure"
        /// The service's name (``APIHealthConfiguration/serviceName``), on every point.
        public static let service = "service"
        /// Which replica wrote the point (``APIHealthConfiguration/instance``), on every point.
        public static let instance = "instance"
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
        public static let count = "count"
        public static let errors = "errors"
        public static let durationSum = "duration_ms_sum"
        public static let durationMinimum = "duration_ms_min"
        public static let durationMaximum = "duration_ms_max"
        public static let requestBytes = "request_bytes"
        public static let responseBytes = "response_bytes"
        /// The bucket above every bound: every request of the interval.
        public static let bucketInfinity = "le_inf"
        /// The field of the bucket bound `milliseconds`: `le_300`, `le_2.5`.
        public static func bucket(milliseconds: Double) -> String {
            if milliseconds == milliseconds.rounded(), abs(milliseconds) < 1e15 { return "le_\(Int64(milliseconds))" }
            var text = String(milliseconds)
            if text.contains("e") { text = String(format: "%.6f", milliseconds) }
            return "le_" + text
        }
    }

    public enum Field {
        public static let durationMilliseconds = "duration_ms"
        public static let timeToFirstByteMilliseconds = "ttfb_ms"
        public static let domainLookupMilliseconds = "dns_ms"
        public static let connectMilliseconds = "connect_ms"
        public static let secureConnectionMilliseconds = "tls_ms"
        public static let requestBytes = "request_bytes"
        public static let responseBytes = "response_bytes"
        public static let statusCode = "status_code"
        public static let success = "success"
        /// 1 for a failed request (transport error, or a status ≥ 400 unless a ``SuccessRule`` says otherwise),
        /// 0 otherwise: averages into an error ratio.
        public static let errors = "errors"
        public static let error = "error"
        public static let correlationID = "correlation_id"
        public static let redirects = "redirects"
        public static let networkProtocol = "protocol"
        public static let reusedConnection = "reused_connection"
        public static let count = "count"
        public static let codingPath = "coding_path"
    }

    /// Agent self-metrics fields.
    public enum AgentField {
        public static let pointsRecorded = "points_recorded"
        public static let pointsInvalid = "points_invalid"
        public static let pointsRepaired = "points_repaired"
        public static let pointsWritten = "points_written"
        public static let pointsDropped = "points_dropped"
        public static let pointsRejected = "points_rejected"
        public static let pointsExpired = "points_expired"
        public static let retries = "retries"
        public static let batchesWritten = "batches_written"
        public static let bytesBeforeGzip = "bytes_before_gzip"
        public static let bytesAfterGzip = "bytes_after_gzip"
        public static let pendingLines = "pending_lines"
        public static let pendingBytes = "pending_bytes"
        public static let pathsOverflowed = "paths_overflowed"
        public static let requestsUncaptured = "requests_uncaptured"
        public static let requestsFiltered = "requests_filtered"
        public static let pointsLost = "points_lost"
        public static let metricsOverflowed = "metrics_overflowed"
        public static let lastError = "last_error"
        public static let intervalPoints = "interval_points"
        public static let requestsOnlyAggregated = "requests_only_aggregated"
    }

    public static let requestTags = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.statusClass, Tag.service, Tag.instance,
    ]
    public static let requestFields = [
        Field.durationMilliseconds, Field.timeToFirstByteMilliseconds, Field.domainLookupMilliseconds,
        Field.connectMilliseconds, Field.secureConnectionMilliseconds, Field.requestBytes, Field.responseBytes,
        Field.statusCode, Field.success, Field.errors, Field.error, Field.correlationID, Field.redirects,
        Field.networkProtocol,
        Field.reusedConnection,
    ]
    public static let parseFailureTags = [
        Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.failure, Tag.service, Tag.instance,
    ]
    public static let parseFailureFields = [Field.count, Field.codingPath, Field.statusCode]
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
    public static let agentFields = [
        AgentField.pointsRecorded, AgentField.pointsInvalid, AgentField.pointsRepaired, AgentField.pointsWritten,
        AgentField.pointsDropped, AgentField.pointsRejected, AgentField.pointsExpired, AgentField.retries,
        AgentField.batchesWritten, AgentField.bytesBeforeGzip, AgentField.bytesAfterGzip, AgentField.pendingLines,
        AgentField.pendingBytes, AgentField.pathsOverflowed, AgentField.requestsUncaptured, AgentField.pointsLost,
        AgentField.metricsOverflowed, AgentField.lastError, AgentField.intervalPoints,
        AgentField.requestsOnlyAggregated, AgentField.requestsFiltered,
    ]
}
