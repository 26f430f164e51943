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

/// Finds the first configured correlation header on the request, then on the response.
package enum CorrelationID {
    static func find(in request: URLRequest, response: HTTPURLResponse?, headers: [String]) -> String? {
        for name in headers {
            if let value = request.value(forHTTPHeaderField: name), !value.isEmpty {
                return Self.value(value, of: name)
            }
        }
        for name in headers {
            if let value = response?.value(forHTTPHeaderField: name), !value.isEmpty {
                return Self.value(value, of: name)
            }
        }
        return nil
    }

    /// The correlation id a header's value gives: a `traceparent`'s trace id, else the value (at most
    /// 256 characters).
    package static func value(_ value: String, of header: String) -> String {
        if header.count == TraceParent.headerName.count, header.lowercased() == TraceParent.headerName,
            let traceID = TraceParent.traceID(of: value)
        {
            return traceID
        }
        return String(value.prefix(256))
    }
}
