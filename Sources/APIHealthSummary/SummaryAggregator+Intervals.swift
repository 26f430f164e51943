import APIHealth
import Foundation
import LineProtocol

/// What an endpoint's interval points added up to: its requests, errors, and the cumulative histogram.
struct IntervalTotals: Sendable {
    var requests = 0
    var errors = 0
    /// Requests at or below each bucket bound (milliseconds; `infinity` for `le_inf`), summed over points.
    var cumulative: [Double: Int] = [:]
    /// The slowest request any point saw (`duration_ms_max`), for a quantile above every bound.
    var maximum: Double?

    mutating func add(_ point: Point) {
        typealias F = PointSchema.IntervalField
        for field in point.fields {
            let value: Double
            switch field.value {
            case .int(let number): value = Double(number)
            case .uint(let number): value = Double(number)
            case .float(let number): value = number
            default: continue
            }
            if field.key == F.count {
                requests += Int(clamping: Int64(max(min(value, 1e18), 0)))
            } else if field.key == F.errors {
                errors += Int(clamping: Int64(max(min(value, 1e18), 0)))
            } else if field.key == F.durationMaximum {
                maximum = max(maximum ?? value, value)
            } else if field.key == F.bucketInfinity {
                cumulative[.infinity, default: 0] += Int(clamping: Int64(max(min(value, 1e18), 0)))
            } else if field.key.hasPrefix("le_"), let bound = Double(field.key.dropFirst(3)) {
                cumulative[bound, default: 0] += Int(clamping: Int64(max(min(value, 1e18), 0)))
            }
        }
    }

    /// The upper bound (milliseconds) of the bucket holding the nearest-rank quantile `q`; above every
    /// bound, the slowest request seen.
    func bound(ofQuantile q: Double) -> Double? {
        guard requests > 0 else { return nil }
        let rank = max(1, Int((q * Double(requests)).rounded(.up)))
        for (bound, count) in cumulative.sorted(by: { $0.key < $1.key }) where count >= rank {
            return bound.isFinite ? bound : maximum
        }
        return maximum
    }
}

extension SummaryAggregator {
    /// Counts one interval line of the endpoint at `index`.
    mutating func addInterval(_ line: UnsafeBufferPointer<UInt8>, endpoint index: Int) {
        guard let point = try? LineParser(precision: precision).parseLine(line) else {
            counts.corrupt += 1
            return
        }
        if let since, let timestamp = point.timestamp?.value(in: .ns), timestamp < since {
            counts.earlier += 1
            return
        }
        counts.intervalLines += 1
        if readsIntervalLines { endpoints[index].intervals.add(point) }
    }

    /// Counts an interval point the agent handed over itself (the demo's, so every request is counted
    /// whether or not its lines were delivered and removed from the spool before they were read).
    ///
    /// - Parameter point: A point of the interval measurement; others are ignored.
    package mutating func add(intervalPoint point: Point) {
        guard point.measurement == intervalMeasurement,
            let host = point.tag(PointSchema.Tag.host), let path = point.tag(PointSchema.Tag.path),
            let method = point.tag(PointSchema.Tag.method)
        else { return }
        for filter in tagFilters where point.tag(filter.key) != filter.value { return }
        let index = endpoint(EndpointKey(host: host, path: path, method: method))
        endpoints[index].intervals.add(point)
    }
}
