import Foundation

/// The summary's rows as JSON lines (`influx-tail --summary --format json`).
extension SummaryTable {
    /// One JSON object per row, one per line (``JSONLines``).
    package static func json(_ rows: [SummaryRow], slotWidth: Int64?) -> String {
        var out = ""
        for row in rows {
            var object = JSONObject()
                .adding("host", row.host).adding("path", row.path).adding("method", row.method)
            if let country = row.country { object = object.adding("country", country) }
            let percentiles =
                row.source == .intervalPoints ? "bucket_bounds" : row.percentilesExact ? "exact" : "sketch"
            object = object.adding("requests", row.requests).adding("errors", row.errors)
                .adding("error_percent", JSONNumber(row.errorPercent))
                .adding("p50_ms", JSONNumber(row.p50)).adding("p95_ms", JSONNumber(row.p95))
                .adding("p99_ms", JSONNumber(row.p99)).adding("percentiles", percentiles)
                .adding("source", row.source.rawValue).adding("last_status", row.lastStatus)
                .adding("parse_failures", row.parseFailures)
                .adding("p95_over_time_ms", row.p95OverTime.map(JSONNumber.init))
                .adding("slot_seconds", JSONNumber(slotWidth.map { Double($0) / 1e9 }))
            out += JSONLines.line(objectiveFields(row, in: object))
        }
        return out
    }

    /// `object` with the row's objectives added, nothing without an objective.
    static func objectiveFields(_ row: SummaryRow, in object: JSONObject) -> JSONObject {
        var object = object
        var any = false
        for (name, objective) in [("availability", row.availability), ("latency", row.latency)] {
            guard let objective else { continue }
            any = true
            object = object.adding("\(name)_objective", JSONNumber(objective.objective))
            if let threshold = objective.thresholdMilliseconds {
                object = object.adding("\(name)_objective_ms", JSONNumber(threshold))
            }
            object = object.adding("\(name)_budget_used", JSONNumber(objective.budgetUsed.map(rounded)))
                .adding("\(name)_burn_rate", JSONNumber(objective.burnRate.map(rounded)))
        }
        guard any else { return object }
        return object.adding("burn_window_seconds", SummaryAggregator.burnWindow / 1_000_000_000)
            .adding("burn_mark", row.burnMark?.rawValue)
    }

    /// A budget share or burn rate to nine decimals: `1 - 0.999` is not exactly 0.001 in binary, and
    /// 20 failed of 1,000 should read 20, not 19.999999999999982.
    static func rounded(_ value: Double) -> Double {
        abs(value) < 1e9 ? (value * 1e9).rounded() / 1e9 : value
    }
}
