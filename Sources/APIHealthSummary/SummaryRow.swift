/// One endpoint (host, templated path, method) of a summary: what `influx-tail --summary` and the
/// demo's closing table print per row.
package struct SummaryRow: Sendable, Hashable {
    package var host: String
    package var path: String
    package var method: String
    package var requests: Int
    /// Requests that failed: a transport error or a status of 400 or more (the `errors` field).
    package var errors: Int
    /// `apihealth_parse_failure` points of this endpoint (responses the client could not decode).
    package var parseFailures: Int
    /// Nearest-rank percentiles of `duration_ms`; `nil` without requests.
    package var p50: Double?
    package var p95: Double?
    package var p99: Double?
    /// Whether the percentiles are exact (at most ``SummaryAggregator/exactLimit`` requests) or from the
    /// bounded sketch.
    package var percentilesExact: Bool
    /// The `status` tag of the request with the latest timestamp ("error" for a transport error).
    package var lastStatus: String?
    /// p95 of `duration_ms` per time slot, oldest first, ``SummaryAggregator/sparklineSlots`` of them;
    /// `nil` where the endpoint had no request in that slot (from the raw points).
    package var p95OverTime: [Double?]
    /// What the requests, errors and percentiles were read from.
    package var source: SummarySource = .rawPoints

    /// Errors as a percentage of requests (0 without requests).
    package var errorPercent: Double { requests == 0 ? 0 : Double(errors) * 100 / Double(requests) }

    /// `host` followed by `path`, as the table shows it.
    package var endpoint: String { host + path }
}

/// What a summary row's requests, errors and percentiles were read from.
package enum SummarySource: String, Sendable, Hashable {
    /// Every request's own point: exact counts, exact (or sketched within 1 %) percentiles.
    case rawPoints = "raw_points"
    /// The interval points, because raw points were sampled or off: exact counts and errors; each
    /// percentile is the upper bound of the histogram bucket holding it.
    case intervalPoints = "interval_points"
}

/// The orders rows can be sorted in.
package enum SummaryOrder: String, Sendable, CaseIterable {
    /// Highest error % first, then highest p99, then most requests.
    case worst
    case requests
    case errors
    case p50
    case p95
    case p99
    /// By host, path and method.
    case endpoint

    /// `rows` in this order (ties broken by endpoint and method, so the order is stable).
    package func sorted(_ rows: [SummaryRow]) -> [SummaryRow] {
        rows.sorted { a, b in
            func byName() -> Bool { (a.host, a.path, a.method) < (b.host, b.path, b.method) }
            func descending(_ x: Double, _ y: Double) -> Bool? { x == y ? nil : x > y }
            let first: Bool?
            switch self {
            case .worst:
                first =
                    descending(a.errorPercent, b.errorPercent) ?? descending(a.p99 ?? -1, b.p99 ?? -1)
                    ?? descending(Double(a.requests), Double(b.requests))
            case .requests: first = descending(Double(a.requests), Double(b.requests))
            case .errors:
                first = descending(Double(a.errors), Double(b.errors)) ?? descending(a.errorPercent, b.errorPercent)
            case .p50: first = descending(a.p50 ?? -1, b.p50 ?? -1)
            case .p95: first = descending(a.p95 ?? -1, b.p95 ?? -1)
            case .p99: first = descending(a.p99 ?? -1, b.p99 ?? -1)
            case .endpoint: first = nil
            }
            return first ?? byName()
        }
    }
}

/// What the summary read besides the rows: shown in its footer.
package struct SummaryCounts: Sendable, Hashable {
    /// Complete lines read (every measurement), before filters.
    package var lines = 0
    /// `apihealth_request` lines counted in the rows.
    package var requestLines = 0
    /// `apihealth_parse_failure` lines counted in the rows.
    package var parseFailureLines = 0
    /// `apihealth_request_interval` lines read (each counts many requests).
    package var intervalLines = 0
    /// Lines of other measurements (the agent's health points, a service's own points).
    package var otherMeasurements = 0
    /// Lines left out by `--where` / `--measurement`.
    package var filteredOut = 0
    /// Request or parse-failure lines timestamped before the summary's start (earlier runs).
    package var earlier = 0
    /// Lines of the request or parse-failure measurement without a host, path or method tag or without a
    /// numeric `duration_ms`: written by something other than the agent.
    package var foreign = 0
    /// Lines cut short (no line end: a crash in the middle of a write).
    package var torn = 0
    /// Lines that are not line protocol.
    package var corrupt = 0
    /// Spool entries not read (links, FIFOs, files of another user, unreadable files).
    package var skippedEntries = 0

    package init() {}

    /// Lines that could not be counted: torn, corrupt or foreign.
    package var unusable: Int { torn + corrupt + foreign }
}
