import APIHealth
import Foundation
import LineProtocol

/// Folds spool lines into one row per endpoint (host, path, method, and the `country` tag where lines
/// carry one): requests, errors, nearest-rank
/// percentiles of `duration_ms`, the latest status, parse failures, and p95 per time slot.
///
/// An endpoint's requests, errors and percentiles come from its raw points when every request has one,
/// and from its interval points (``PointSchema/Measurement/requestInterval``) when they count more
/// requests than its raw points (raw points sampled, budgeted or off): then the counts are exact and each
/// percentile is the upper bound of the histogram bucket that holds it (``SummaryRow/source``). The
/// objectives interval points carry give each row its budget used and current burn rate
/// (``SummaryRow/availability``, ``SummaryRow/latency``).
///
/// ```swift
/// var summary = SummaryAggregator(precision: reader.precision)
/// for line in lines { summary.add(line) }
/// let rows = SummaryOrder.worst.sorted(summary.rows())
/// ```
///
/// Memory grows with the number of endpoints and distinct series, not with the number of lines: each
/// endpoint keeps at most ``exactLimit`` durations, then a bounded sketch (within 1 %), and at most
/// ``sparklineSlots`` small sketches for its latency over time.
package struct SummaryAggregator: Sendable {
    /// Durations kept exactly per endpoint; past this, percentiles come from a sketch within 1 %.
    package static let exactLimit = 10_000
    /// Time slots of the p95 sparkline. The slots share one time axis for every row: a slot starts one
    /// second wide and doubles (merging pairs) whenever the time covered would need more slots.
    package static let sparklineSlots = 16
    /// How far back from the newest interval point the current burn rate looks: 5 minutes (nanoseconds),
    /// the short window of the fastest burn-rate alert. A point is in it when stamped after the newest
    /// point's timestamp minus this (points are stamped at their interval's end).
    package static let burnWindow: Int64 = 300_000_000_000
    /// Series remembered with their verdict; past this the memo starts again (lines still count).
    private static let seriesMemoLimit = 65_536

    package var measurementFilter: String?
    package var tagFilters: [(key: String, value: String)]
    /// Request and parse-failure lines timestamped before this (nanoseconds since the epoch) are only
    /// counted in ``SummaryCounts/earlier``.
    package var since: Int64?
    package let precision: Precision
    package let requestMeasurement: String
    package let parseFailureMeasurement: String
    /// The interval points' measurement.
    package let intervalMeasurement: String
    /// Whether interval lines read from the spool count in the rows (the demo hands its interval points
    /// over with ``add(intervalPoint:)`` instead; the spool's are then only counted in the footer).
    package var readsIntervalLines = true
    /// The cache advice of the interval points counted (``CacheAdviceAggregator``): what `--cache` and the
    /// "What to cache" section print.
    package var cacheAdvice: CacheAdviceAggregator

    package internal(set) var counts = SummaryCounts()
    /// Tag keys seen on any line: a `--where` naming a key outside this set matches nothing.
    package private(set) var tagKeysSeen: Set<String> = []
    /// The newest interval point's timestamp (nanoseconds since the epoch), where the burn-rate window ends.
    package internal(set) var newestInterval: Int64?
    /// Width of one sparkline slot in nanoseconds.
    package private(set) var slotWidth: Int64 = 1_000_000_000
    /// Absolute index (timestamp / slotWidth) of the oldest and newest slots holding a request.
    private var firstSlot: Int64?
    private var lastSlot: Int64?

    var endpoints: [Endpoint] = []
    var endpointIndex: [EndpointKey: Int] = [:]
    /// What each series (measurement and tags, as written) is, so most lines are not parsed in full:
    /// by a hash of the series bytes, then the bytes themselves.
    private var series: [UInt64: [(key: [UInt8], verdict: Verdict)]] = [:]
    private var seriesCount = 0
    /// Where the last line's parts are (``LineParser/scanLine(_:lineNumber:into:)``): reused, so reading a
    /// line allocates nothing.
    private var spans = LineSpans()

    package init(
        precision: Precision = .ns,
        measurement: String? = nil,
        tags: [(key: String, value: String)] = [],
        since: Int64? = nil,
        requestMeasurement: String = PointSchema.Measurement.request,
        parseFailureMeasurement: String = PointSchema.Measurement.parseFailure,
        intervalMeasurement: String = PointSchema.Measurement.requestInterval
    ) {
        self.intervalMeasurement = intervalMeasurement
        self.cacheAdvice = CacheAdviceAggregator(intervalMeasurement: intervalMeasurement)
        self.precision = precision
        self.measurementFilter = measurement
        self.tagFilters = tags
        self.since = since
        self.requestMeasurement = requestMeasurement
        self.parseFailureMeasurement = parseFailureMeasurement
    }

    struct EndpointKey: Hashable, Sendable {
        var host: String
        var path: String
        var method: String
        /// The `country` tag, so the same endpoint seen from two countries is two rows.
        var country: String?
    }

    struct Endpoint: Sendable {
        var key: EndpointKey
        /// What its interval points counted.
        var intervals = IntervalTotals()
        var requests = 0
        var errors = 0
        var parseFailures = 0
        var durations = QuantileSketch(exactLimit: SummaryAggregator.exactLimit)
        var lastStatus: String?
        var lastTimestamp = Int64.min
        var slots: [Int64: QuantileSketch] = [:]
    }

    private enum Verdict: Sendable {
        case request(endpoint: Int, status: String)
        case parseFailure(endpoint: Int)
        case interval(endpoint: Int)
        case other
        case foreign
        case filteredOut
        /// An interval line a filter leaves out: still in the cache advice's time observed.
        case intervalFilteredOut
    }

    // MARK: - Adding lines

    /// Counts one complete line (without its line end).
    package mutating func add(_ line: [UInt8]) {
        line.withUnsafeBufferPointer { add($0) }
    }

    /// Counts one complete line (without its line end), read by the package's line-protocol parser: a line it
    /// refuses is corrupt; a valid one without what the summary needs (a duration, the endpoint's tags) is
    /// foreign.
    package mutating func add(_ line: UnsafeBufferPointer<UInt8>) {
        let parser = LineParser(precision: precision)
        do {
            guard try parser.scanLine(line, into: &spans) else { return }
        } catch {
            counts.corrupt += 1
            return
        }
        let key = UnsafeBufferPointer(rebasing: line[0..<spans.seriesEnd])
        let hash = Self.hash(key)
        let verdict: Verdict
        if let known = series[hash]?.first(where: { Self.equal($0.key, key) }) {
            verdict = known.verdict
        } else {
            guard let judged = judge(line) else { return }
            verdict = judged
            if seriesCount >= Self.seriesMemoLimit {
                series.removeAll(keepingCapacity: true)
                seriesCount = 0
            }
            series[hash, default: []].append((Array(key), judged))
            seriesCount += 1
        }
        counts.lines += 1
        switch verdict {
        case .other: counts.otherMeasurements += 1
        case .foreign: counts.foreign += 1
        case .filteredOut: counts.filteredOut += 1
        case .intervalFilteredOut:
            counts.filteredOut += 1
            observeFilteredInterval(line)
        case .request(let index, let status):
            let fields = readFields(line, parser: parser)
            guard let duration = fields.duration else {
                counts.foreign += 1
                return
            }
            if let since, let timestamp = fields.timestamp, timestamp < since {
                counts.earlier += 1
                return
            }
            counts.requestLines += 1
            let failed: Bool
            if let errors = fields.errors {
                failed = errors > 0
            } else if let success = fields.success {
                failed = !success
            } else {
                failed = status == "error" || (Int(status) ?? 0) >= 400
            }
            let slot = fields.timestamp.map { self.slot(for: $0) }
            endpoints[index].requests += 1
            if failed { endpoints[index].errors += 1 }
            endpoints[index].durations.add(duration)
            let timestamp = fields.timestamp ?? Int64.max
            if timestamp >= endpoints[index].lastTimestamp {
                endpoints[index].lastTimestamp = timestamp
                endpoints[index].lastStatus = status
            }
            if let slot {
                endpoints[index].slots[slot, default: Self.slotDigest()].add(duration)
            }
        case .interval(let index):
            addInterval(line, endpoint: index)
        case .parseFailure(let index):
            let fields = readFields(line, parser: parser)
            if let since, let timestamp = fields.timestamp, timestamp < since {
                counts.earlier += 1
                return
            }
            counts.parseFailureLines += 1
            endpoints[index].parseFailures += Int(max(1, min(fields.count ?? 1, Int64(Int32.max))))
        }
    }

    /// Counts a problem the spool reader reported (a torn or corrupt line, a skipped entry).
    package mutating func count(_ problem: SpoolProblem) {
        switch problem.kind {
        case .tornLine: counts.torn += 1
        case .corruptLine: counts.corrupt += 1
        case .skippedEntry: counts.skippedEntries += 1
        }
    }

    /// The `--where` keys no line read so far has.
    package var unknownFilterKeys: [String] {
        var unknown: [String] = []
        for filter in tagFilters where !tagKeysSeen.contains(filter.key) && !unknown.contains(filter.key) {
            unknown.append(filter.key)
        }
        return unknown
    }

    private static func slotDigest() -> QuantileSketch { QuantileSketch(relativeAccuracy: 0.05, exactLimit: 64) }

    /// Parses the first line of a series in full and decides what its lines count as.
    private mutating func judge(_ line: UnsafeBufferPointer<UInt8>) -> Verdict? {
        let point: Point
        do {
            guard let parsed = try LineParser(precision: precision).parseLine(line) else { return nil }
            point = parsed
        } catch {
            counts.corrupt += 1
            return nil
        }
        for tag in point.tags { tagKeysSeen.insert(tag.key) }
        let filteredOut: Verdict = point.measurement == intervalMeasurement ? .intervalFilteredOut : .filteredOut
        if let measurementFilter, point.measurement != measurementFilter { return filteredOut }
        for filter in tagFilters where point.tag(filter.key) != filter.value { return filteredOut }
        let isRequest = point.measurement == requestMeasurement
        let isInterval = point.measurement == intervalMeasurement
        guard isRequest || isInterval || point.measurement == parseFailureMeasurement else { return .other }
        guard let host = point.tag(PointSchema.Tag.host), let path = point.tag(PointSchema.Tag.path),
            let method = point.tag(PointSchema.Tag.method)
        else { return .foreign }
        let key = EndpointKey(host: host, path: path, method: method, country: point.tag(PointSchema.Tag.country))
        let index = endpoint(key)
        if isInterval { return .interval(endpoint: index) }
        if isRequest { return .request(endpoint: index, status: point.tag(PointSchema.Tag.status) ?? "?") }
        return .parseFailure(endpoint: index)
    }

    /// The index of the endpoint `key`, made if new.
    mutating func endpoint(_ key: EndpointKey) -> Int {
        if let known = endpointIndex[key] { return known }
        endpoints.append(Endpoint(key: key))
        endpointIndex[key] = endpoints.count - 1
        return endpoints.count - 1
    }

    /// The sparkline slot of `timestamp`, widening every slot (merging pairs) until the time covered fits.
    private mutating func slot(for timestamp: Int64) -> Int64 {
        var slot = Self.floorDivide(timestamp, slotWidth)
        guard let first = firstSlot, let last = lastSlot else {
            firstSlot = slot
            lastSlot = slot
            return slot
        }
        var low = min(first, slot)
        var high = max(last, slot)
        while high - low + 1 > Int64(Self.sparklineSlots) {
            slotWidth = slotWidth.multipliedReportingOverflow(by: 2).overflow ? slotWidth : slotWidth * 2
            low = Self.floorDivide(low, 2)
            high = Self.floorDivide(high, 2)
            slot = Self.floorDivide(timestamp, slotWidth)
            for index in endpoints.indices where !endpoints[index].slots.isEmpty {
                var merged: [Int64: QuantileSketch] = [:]
                for (old, digest) in endpoints[index].slots {
                    merged[Self.floorDivide(old, 2), default: Self.slotDigest()].merge(digest)
                }
                endpoints[index].slots = merged
            }
        }
        firstSlot = low
        lastSlot = high
        return slot
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor
        return (value % divisor != 0 && (value < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    // MARK: - Rows

    /// The start of the sparkline's first slot and the width of each, in nanoseconds since the epoch.
    package var timeAxis: (start: Int64, slotWidth: Int64)? {
        guard let lastSlot else { return nil }
        return ((lastSlot - Int64(Self.sparklineSlots) + 1) &* slotWidth, slotWidth)
    }

    /// One row per endpoint with at least one request or parse failure, in no particular order.
    package func rows() -> [SummaryRow] {
        let slotRange: ClosedRange<Int64>? = lastSlot.map { ($0 - Int64(Self.sparklineSlots) + 1)...$0 }
        let windowStart = newestInterval.map { $0 &- Self.burnWindow }
        return endpoints.compactMap { endpoint in
            guard endpoint.requests > 0 || endpoint.parseFailures > 0 || endpoint.intervals.requests > 0 else {
                return nil
            }
            var quantiles: [Double?] = [nil, nil, nil]
            let fromIntervals = endpoint.intervals.requests > endpoint.requests
            if fromIntervals {
                quantiles = [0.5, 0.95, 0.99].map { endpoint.intervals.bound(ofQuantile: $0) }
            } else {
                endpoint.durations.quantiles([0.5, 0.95, 0.99]) { index, value in quantiles[index] = value }
            }
            let overTime: [Double?] =
                slotRange.map { range in range.map { endpoint.slots[$0]?.quantile(0.95) } }
                ?? Array(repeating: nil, count: Self.sparklineSlots)
            let objectives = endpoint.intervals.objectives(after: windowStart)
            return SummaryRow(
                host: endpoint.key.host,
                path: endpoint.key.path,
                method: endpoint.key.method,
                country: endpoint.key.country,
                requests: fromIntervals ? endpoint.intervals.requests : endpoint.requests,
                errors: fromIntervals ? endpoint.intervals.errors : endpoint.errors,
                parseFailures: endpoint.parseFailures,
                p50: quantiles[0],
                p95: quantiles[1],
                p99: quantiles[2],
                percentilesExact: !fromIntervals && endpoint.durations.isExact,
                lastStatus: endpoint.lastStatus,
                p95OverTime: overTime,
                source: fromIntervals ? .intervalPoints : .rawPoints,
                availability: objectives.availability,
                latency: objectives.latency
            )
        }
    }

    // MARK: - Reading the fields

    /// What the summary reads of a line's fields.
    struct ReadFields {
        var duration: Double?
        var errors: Int64?
        var success: Bool?
        var count: Int64?
        /// Nanoseconds since the epoch.
        var timestamp: Int64?
    }

    /// The fields the summary needs and the timestamp, from the line ``spans`` holds.
    private func readFields(_ line: UnsafeBufferPointer<UInt8>, parser: LineParser) -> ReadFields {
        var result = ReadFields()
        for field in spans.fields {
            let key = UnsafeBufferPointer(rebasing: line[field.key])
            if Self.isKey(key, "duration_ms") {
                result.duration = parser.fieldValue(field, in: line).flatMap(Self.number)
            } else if Self.isKey(key, "errors") {
                result.errors = parser.fieldValue(field, in: line).flatMap(Self.number).map { Int64($0) }
            } else if Self.isKey(key, "success") {
                if case .bool(let value)? = parser.fieldValue(field, in: line) { result.success = value }
            } else if Self.isKey(key, "count") {
                result.count = parser.fieldValue(field, in: line).flatMap(Self.number).map {
                    Int64(max(min($0, 1e18), -1e18))
                }
            }
        }
        if let raw = spans.timestamp {
            let (scaled, overflow) = raw.multipliedReportingOverflow(by: precision.nanosecondsPerUnit)
            result.timestamp = overflow ? (raw < 0 ? Int64.min : Int64.max) : scaled
        }
        return result
    }

    /// A float, integer or unsigned value as a double; `nil` for strings and booleans.
    private static func number(_ value: FieldValue) -> Double? {
        switch value {
        case .float(let number): number
        case .int(let number): Double(number)
        case .uint(let number): Double(number)
        case .bool, .string: nil
        }
    }

    /// Whether `key` is the field name `name` (names of ``PointSchema/Field``, as literals so the loop
    /// reads no globals).
    private static func isKey(_ key: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
        key.count == name.utf8CodeUnitCount && memcmp(key.baseAddress!, name.utf8Start, key.count) == 0
    }

    /// FNV-1a over eight bytes at a time, with a shift to spread the high bits: the series memo's key.
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let raw = UnsafeRawBufferPointer(bytes)
        var index = 0
        while index + 8 <= raw.count {
            hash = (hash ^ raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) &* 0x100_0000_01b3
            hash ^= hash >> 29
            index += 8
        }
        while index < raw.count {
            hash = (hash ^ UInt64(raw[index])) &* 0x100_0000_01b3
            index += 1
        }
        return hash
    }

    static func equal(_ stored: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard stored.count == bytes.count else { return false }
        return stored.withUnsafeBufferPointer { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }
}
