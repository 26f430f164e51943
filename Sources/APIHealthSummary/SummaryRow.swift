/// One endpoint (host, templated path, method) of a summary, from one country when its lines carry the
/// `country` tag: what `influx-tail --summary` and the demo's closing table print per row.
package struct SummaryRow: Sendable, Hashable {
    package var host: String
    package var path: String
    package var method: String
    /// The `country` tag of its lines (`BR`); `nil` when they carry none.
    package var country: String?
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
    /// The availability objective its interval points carried (`objective_availability`), and how fast
    /// its budget goes; `nil` when none did.
    package var availability: ObjectiveSummary?
    /// The latency objective its interval points carried (`objective_latency`, `objective_latency_ms`),
    /// and how fast its budget goes; `nil` when none did.
    package var latency: ObjectiveSummary?

    /// The higher of its current burn rates; `nil` without an objective or without requests in the window.
    package var highestBurnRate: Double? {
        [availability?.burnRate, latency?.burnRate].compactMap { $0 }.max()
    }

    /// How fast its fastest budget burns, by the page rates of the shipped alerts.
    package var burnMark: BurnMark? { highestBurnRate.flatMap(BurnMark.init(burnRate:)) }

    /// Errors as a percentage of requests (0 without requests).
    package var errorPercent: Double { requests == 0 ? 0 : Double(errors) * 100 / Double(requests) }

    /// `host` followed by `path`, as the table shows it.
    package var endpoint: String { host + path }
}

/// An objective of an endpoint, as its interval points carried it, and the budget it spent.
///
/// Both figures are the share of bad requests over the share the objective allows (`1 - objective`), as
/// the shipped burn-rate alerts compute it: failed requests (`errors / count`) for availability, requests
/// slower than the threshold (`1 - requests_within_latency_objective / count`) for latency.
package struct ObjectiveSummary: Sendable, Hashable {
    /// The objective of the newest point that carried one (0.999).
    package var objective: Double
    /// The latency threshold of that point, in milliseconds; `nil` for availability.
    package var thresholdMilliseconds: Double?
    /// The bad requests of every point read as a share of what the objective allows for their requests:
    /// 0.4 spent 40 % of the budget, above 1 missed the objective over the time read; `nil` without requests.
    package var budgetUsed: Double?
    /// The burn rate over the last ``SummaryAggregator/burnWindow`` of interval points (ending at the newest
    /// point read): 1 spends a budget exactly over its window; `nil` without requests in it.
    package var burnRate: Double?
}

/// How fast an endpoint burns a budget over the burn-rate window, by the page rates of the shipped alerts
/// (the Google SRE workbook's, for a 30-day budget).
package enum BurnMark: String, Sendable, Hashable, CaseIterable {
    /// At or above ``SummaryTable/burnRatePage`` (14.4): the rate that pages over 1 hour (2 % of a 30-day
    /// budget an hour).
    case page = "!!"
    /// At or above ``SummaryTable/burnRateWarning`` (6): the rate that pages over 6 hours.
    case warning = "!"

    /// The mark of `burnRate`, or `nil` below ``SummaryTable/burnRateWarning``.
    init?(burnRate: Double) {
        // A rate computed as 14.399999… from exact counts is 14.4.
        let rate = burnRate * (1 + 1e-9)
        if rate >= SummaryTable.burnRatePage {
            self = .page
        } else if rate >= SummaryTable.burnRateWarning {
            self = .warning
        } else {
            return nil
        }
    }
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
    /// Highest current burn rate first (either objective), then most budget used; rows without an
    /// objective last, worst first.
    case burn
    /// By host, path, method and country.
    case endpoint

    /// `rows` in this order (ties broken by endpoint, method and country, so the order is stable).
    package func sorted(_ rows: [SummaryRow]) -> [SummaryRow] {
        rows.sorted { a, b in
            precedes(a, b)
                ?? ((a.host, a.path, a.method, a.country ?? "") < (b.host, b.path, b.method, b.country ?? ""))
        }
    }

    /// Whether `a` comes before `b` in this order; `nil` when the order does not tell them apart.
    private func precedes(_ a: SummaryRow, _ b: SummaryRow) -> Bool? {
        func descending(_ x: Double, _ y: Double) -> Bool? { x == y ? nil : x > y }
        switch self {
        case .worst:
            return descending(a.errorPercent, b.errorPercent) ?? descending(a.p99 ?? -1, b.p99 ?? -1)
                ?? descending(Double(a.requests), Double(b.requests))
        case .requests: return descending(Double(a.requests), Double(b.requests))
        case .errors:
            return descending(Double(a.errors), Double(b.errors)) ?? descending(a.errorPercent, b.errorPercent)
        case .p50: return descending(a.p50 ?? -1, b.p50 ?? -1)
        case .p95: return descending(a.p95 ?? -1, b.p95 ?? -1)
        case .p99: return descending(a.p99 ?? -1, b.p99 ?? -1)
        case .burn:
            func hasObjective(_ row: SummaryRow) -> Double { row.availability != nil || row.latency != nil ? 1 : 0 }
            func used(_ row: SummaryRow) -> Double {
                [row.availability?.budgetUsed, row.latency?.budgetUsed].compactMap { $0 }.max() ?? -1
            }
            return descending(hasObjective(a), hasObjective(b))
                ?? descending(a.highestBurnRate ?? -1, b.highestBurnRate ?? -1) ?? descending(used(a), used(b))
                ?? SummaryOrder.worst.precedes(a, b)
        case .endpoint: return nil
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
