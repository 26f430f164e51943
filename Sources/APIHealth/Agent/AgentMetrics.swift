/// What happened to the points the agent was given, counted since it started.
///
/// ```swift
/// let metrics = agent.metrics
/// if metrics.pointsDropped > 0 { logger.info("APIHealth dropped \(metrics.pointsDropped) points") }
/// ```
///
/// The same counters ship as the agent's own measurement (`apihealth_agent` by default).
public struct AgentMetrics: Sendable, Hashable {
    /// Points encoded into a pending batch.
    public var pointsRecorded: UInt64 = 0
    /// Points the encoder refused (empty measurement, no writable field, timestamp out of range, series
    /// key too long for InfluxDB).
    public var pointsInvalid: UInt64 = 0
    /// Points written with a documented repair (a field or tag left out, a name repaired, a string cut
    /// or its line breaks replaced, an unsigned value clamped for InfluxDB 1.x).
    public var pointsRepaired: UInt64 = 0
    /// Points the server acknowledged with a 2xx.
    public var pointsWritten: UInt64 = 0
    /// Points dropped because pending data exceeded its cap (oldest first), recorded after shutdown, or
    /// left without a free timestamp in their series within a second of their own (see the README).
    public var pointsDropped: UInt64 = 0
    /// Points that could be kept neither by the server nor in the spool: pending in memory only when
    /// the agent shut down (no spool, or writing to it failed).
    public var pointsLost: UInt64 = 0
    /// Points the server refused for good (400, 422, 413 for a single line), kept in `rejected/`.
    public var pointsRejected: UInt64 = 0
    /// Points whose batch kept failing past the retry limit, kept in `rejected/`.
    public var pointsExpired: UInt64 = 0
    /// Lines found torn or corrupt in the spool at start, left out.
    public var spoolLinesLeftOut: UInt64 = 0
    /// Failed spool operations (the points stay in memory and are still sent; see ``pointsLost``).
    public var spoolWriteErrors: UInt64 = 0
    /// Write requests that failed and were scheduled again.
    public var retries: UInt64 = 0
    /// Write requests answered with a 2xx.
    public var batchesWritten: UInt64 = 0
    /// Uncompressed bytes of the requests sent.
    public var bytesBeforeGzip: UInt64 = 0
    /// Bytes on the wire after gzip.
    public var bytesAfterGzip: UInt64 = 0
    /// Lines recorded and not yet acknowledged.
    public var pendingLines: Int = 0
    /// Bytes recorded and not yet acknowledged.
    public var pendingBytes: Int = 0
    /// Requests made through an instrumented session that the hook let through without recording
    /// them (the platform gave it no safe way to observe them).
    public var requestsUncaptured: UInt64 = 0
    /// Request samples the capture filter (``APIHealthConfiguration/CaptureOptions/filter``) chose not
    /// to record: a choice, not a loss (they are in no loss count).
    public var requestsFiltered: UInt64 = 0
    /// Requests whose path the endpoint learner wrote as the overflow path
    /// (``APIHealthConfiguration/CaptureOptions/overflowPath``) because its cap on templates was reached.
    public var pathsOverflowed: UInt64 = 0
    /// Metrics handlers (APIHealthMetrics) created past the cardinality cap, recorded into the shared
    /// overflow series instead of their own.
    public var metricsOverflowed: UInt64 = 0
    /// Interval points recorded (one per endpoint and interval, see ``AggregationOptions``): with the
    /// requests written as points of their own, parse failures and health points, what `pointsRecorded` holds.
    public var intervalPoints: UInt64 = 0
    /// Requests counted in the interval aggregates and not written as a point of their own
    /// (``RawPoints``): a choice, not a loss.
    public var requestsOnlyAggregated: UInt64 = 0
    /// The cap on endpoint aggregates (``AggregationOptions/maximumEndpoints``; 0 without aggregation).
    public var endpointLimit: Int = 0
    /// Endpoint aggregates held now (the overflow series is not one).
    public var endpoints: Int = 0
    /// Requests counted in the overflow series because their endpoint came past ``endpointLimit``.
    public var requestsOverflowed: UInt64 = 0
    /// Endpoint aggregates evicted after ``AggregationOptions/idleEviction`` without a request.
    public var endpointsEvicted: UInt64 = 0
    /// Keys the cache advisor evicted to stay within its bound
    /// (``APIHealthConfiguration/CaptureOptions/cacheAdvice``): their next response is judged as a first one.
    public var cacheKeysEvicted: UInt64 = 0
    /// Values of the country header (``APIHealthConfiguration/CaptureOptions/countryHeader``) that were
    /// not country codes, ignored.
    public var countryValuesIgnored: UInt64 = 0
    /// The offset the agent corrects the device's clock by (true time minus the device's), once the
    /// `Date` headers it saw agree; `nil` before, and when ``APIHealthConfiguration/correctsClock`` is off.
    public var clockOffset: Duration?
    /// How far true time may be from the corrected clock: half the range the `Date` headers agree on
    /// (true time lies in it when the servers' clocks are right); `nil` while ``clockOffset`` is.
    public var clockOffsetUncertainty: Duration?
    /// `Date` headers that were no reading of the clock: malformed, more than a day off, too slow a round
    /// trip, or from the API once a destination had answered (``APIHealthConfiguration/correctsClock``).
    public var clockReadingsIgnored: UInt64 = 0
    /// Points that went out (or were dropped) with the device's own time, so that they lie as far from true
    /// time as the device's clock did (``APIHealthConfiguration/correctsClock``): while no offset is known,
    /// every point recorded; once one is, the points recorded before it that could not be moved to true
    /// time — sent or being sent already, held only compressed, or dropped. Points still pending when the
    /// offset is learned are moved to true time and are not counted; lines a previous run left in the spool
    /// go out as that run stamped them, and are not this run's points.
    public var pointsOnDeviceClock: UInt64 = 0
    /// The last failure, if the last write failed.
    public var lastError: String?
    /// What each destination did, in the order they are configured (the counters above add them up;
    /// the pending lines and bytes above are what the agent holds for any of them).
    public var destinations: [DestinationMetrics] = []

    /// All zero.
    public init() {}
}

/// What one destination did with the points sent to it.
///
/// ```swift
/// for (index, destination) in agent.metrics.destinations.enumerated() where destination.pointsDropped > 0 {
///     logger.info("destination \(index) is \(destination.pendingLines) lines behind")
/// }
/// ```
public struct DestinationMetrics: Sendable, Hashable {
    /// Points the destination acknowledged.
    public var pointsWritten: UInt64 = 0
    /// Points dropped because this destination's backlog exceeded its cap (oldest first).
    public var pointsDropped: UInt64 = 0
    /// Points the destination refused for good.
    public var pointsRejected: UInt64 = 0
    /// Points whose batch kept failing at this destination past the retry limit.
    public var pointsExpired: UInt64 = 0
    /// Write requests to it that failed and were scheduled again.
    public var retries: UInt64 = 0
    /// Write requests it answered with a 2xx.
    public var batchesWritten: UInt64 = 0
    /// Uncompressed bytes of the requests it stored.
    public var bytesBeforeGzip: UInt64 = 0
    /// Bytes on the wire after gzip.
    public var bytesAfterGzip: UInt64 = 0
    /// Lines recorded that it has not stored yet: its backlog.
    public var pendingLines: Int = 0
    /// Bytes of its backlog (kept within its cap).
    public var pendingBytes: Int = 0
    /// Its last failure, if its last write failed.
    public var lastError: String?

    /// All zero.
    public init() {}
}

extension AgentMetrics {
    /// Sets what the endpoint aggregates counted, as the record loop published it.
    mutating func set(_ counts: RequestAggregator.Counts) {
        endpoints = counts.endpoints
        requestsOverflowed = counts.requestsOverflowed
        endpointsEvicted = counts.evicted
        requestsOnlyAggregated = counts.requestsOnlyAggregated
        intervalPoints = counts.pointsTaken
    }
}
