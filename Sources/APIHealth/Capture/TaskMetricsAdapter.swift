import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension RequestSample {
    /// Builds a sample from the task metrics the OS delivers on Apple platforms, with DNS, connect, TLS
    /// and time-to-first-byte detail. (swift-corelibs-foundation on Linux never delivers metrics.)
    ///
    /// ```swift
    /// func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
    ///     if let sample = RequestSample(metrics: metrics, task: task, module: "feed") { agent.record(sample) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - metrics: The metrics the task finished collecting.
    ///   - task: The task, for its response and error.
    ///   - module: The part of the service that made the call.
    ///   - correlationHeaders: Headers whose value becomes the correlation id (first found).
    public init?(
        metrics: URLSessionTaskMetrics,
        task: URLSessionTask,
        module: String,
        correlationHeaders: [String] = []
    ) {
        guard let first = metrics.transactionMetrics.first, let last = metrics.transactionMetrics.last,
            let url = first.request.url
        else { return nil }
        let interval = metrics.taskInterval
        self.init(
            method: first.request.httpMethod ?? "GET",
            url: url,
            module: module,
            startedAt: interval.start,
            duration: .seconds(interval.duration)
        )
        let http = task.response as? HTTPURLResponse
        statusCode = http?.statusCode
        if let error = task.error { self.error = TransportError(error) }
        redirectCount = metrics.redirectCount
        func span(_ start: Date?, _ end: Date?) -> Duration? {
            guard let start, let end, end >= start else { return nil }
            return .seconds(end.timeIntervalSince(start))
        }
        domainLookup = span(last.domainLookupStartDate, last.domainLookupEndDate)
        connect = span(last.connectStartDate, last.connectEndDate)
        secureConnection = span(last.secureConnectionStartDate, last.secureConnectionEndDate)
        timeToFirstByte = span(interval.start, last.responseStartDate)
        networkProtocol = last.networkProtocolName
        reusedConnection = last.isReusedConnection
        requestBytes = UInt64(max(0, metrics.transactionMetrics.reduce(0) { $0 + $1.countOfRequestBodyBytesSent }))
        responseBytes = UInt64(max(0, last.countOfResponseBodyBytesAfterDecoding))
        correlationID = CorrelationID.find(in: first.request, response: http, headers: correlationHeaders)
    }
}

/// Finds the first configured correlation header on the request, then on the response. Under the `Package` SPI
/// so that the other clients' capture matches headers the same way, inlined (see ``Locked``).
@_spi(Package) public enum CorrelationID {
    /// Each header of the request, then of the response, is looked at once, and matched against the configured
    /// names without making a lowercased copy of either (`value(forHTTPHeaderField:)` lowercases both, for
    /// every header, for every name it is asked).
    static func find(in request: URLRequest, response: HTTPURLResponse?, headers: [String]) -> String? {
        if let fields = request.allHTTPHeaderFields, !fields.isEmpty,
            let found = first(of: headers, in: fields.lazy.map { ($0.key, $0.value) })
        {
            return found
        }
        guard let response else { return nil }
        return find(in: response, headers: headers)
    }

    /// The first of `headers` on `response` (any case).
    static func find(in response: HTTPURLResponse, headers: [String]) -> String? {
        if let fields = CorelibsResponse.headerFields(of: response) {
            return first(of: headers, in: fields.lazy.map { ($0.key, $0.value) })
        }
        return first(
            of: headers,
            in: response.allHeaderFields.lazy.compactMap { field, value in
                guard let field = field.base as? String, let value = value as? String else { return nil }
                return (field, value)
            }
        )
    }

    /// The value of the earliest of `names` among `fields` (any case), non-empty; each field is looked at once.
    @inlinable
    public static func first<Fields: Sequence>(of names: [String], in fields: Fields) -> String?
    where Fields.Element == (String, String) {
        var best: (rank: Int, value: String)?
        for (field, value) in fields where !value.isEmpty {
            // Most fields are no name's length: they are passed over without comparing a byte.
            let length = field.utf8.count
            guard let rank = names.firstIndex(where: { $0.utf8.count == length && equalIgnoringASCIICase($0, field) })
            else { continue }
            if best == nil || rank < best!.rank { best = (rank, value) }
            if rank == 0 { break }
        }
        guard let best else { return nil }
        return Self.value(best.value, of: names[best.rank])
    }

    /// Whether `a` and `b` are the same but for the case of ASCII letters (header names are ASCII).
    public static func equalIgnoringASCIICase(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Both contiguous (native strings are): compared in place, a byte at a time.
        if let equal = a.utf8.withContiguousStorageIfAvailable({ left in
            b.utf8.withContiguousStorageIfAvailable { right in
                for index in 0..<left.count where left[index] != right[index] {
                    if lowercasedASCII(left[index]) != lowercasedASCII(right[index]) { return false }
                }
                return true
            }
        }), let equal {
            return equal
        }
        for (x, y) in zip(a.utf8, b.utf8) where x != y {
            if lowercasedASCII(x) != lowercasedASCII(y) { return false }
        }
        return true
    }

    @inline(__always)
    private static func lowercasedASCII(_ byte: UInt8) -> UInt8 {
        byte >= 65 && byte <= 90 ? byte | 0x20 : byte
    }

    /// The correlation id a header's value gives: a `traceparent`'s trace id, else the value (at most
    /// 256 characters).
    public static func value(_ value: String, of header: String) -> String {
        if equalIgnoringASCIICase(header, TraceParent.headerName),
            let traceID = TraceParent.traceID(of: value)
        {
            return traceID
        }
        return String(value.prefix(256))
    }
}
