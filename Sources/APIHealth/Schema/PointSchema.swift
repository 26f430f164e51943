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
    }

    public enum Tag {
        public static let host = "host"
        public static let path = "path"
        public static let method = "method"
        public static let module = "module"
        public static let status = "status"
        public static let statusClass = "status_class"
        public static let failure = "failure"
        public static let service = "service"
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
    }

    public static let requestTags = [Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.statusClass]
    public static let requestFields = [
        Field.durationMilliseconds, Field.timeToFirstByteMilliseconds, Field.domainLookupMilliseconds,
        Field.connectMilliseconds, Field.secureConnectionMilliseconds, Field.requestBytes, Field.responseBytes,
        Field.statusCode, Field.success, Field.errors, Field.error, Field.correlationID, Field.redirects,
        Field.networkProtocol,
        Field.reusedConnection,
    ]
    public static let parseFailureTags = [Tag.host, Tag.path, Tag.method, Tag.module, Tag.status, Tag.failure]
    public static let parseFailureFields = [Field.count, Field.codingPath, Field.statusCode]
    public static let agentTags = [Tag.service]
    public static let agentFields = [
        AgentField.pointsRecorded, AgentField.pointsInvalid, AgentField.pointsRepaired, AgentField.pointsWritten,
        AgentField.pointsDropped, AgentField.pointsRejected, AgentField.pointsExpired, AgentField.retries,
        AgentField.batchesWritten, AgentField.bytesBeforeGzip, AgentField.bytesAfterGzip, AgentField.pendingLines,
        AgentField.pendingBytes, AgentField.pathsOverflowed, AgentField.requestsUncaptured, AgentField.pointsLost,
        AgentField.metricsOverflowed, AgentField.requestsFiltered, AgentField.lastError,
    ]
}
