import Foundation
import LineProtocol

/// A request series rendered once (measurement and tags, escaped and sorted), with the identity
/// timestamp de-duplication knows it by, the parts of a sample besides its URL it stands for, and
/// whether its requests succeed.
final class RequestSeries: Sendable {
    let key: SeriesKey
    let id: Int
    let method: String
    let module: String
    let statusCode: Int?
    /// Whether a request of this series without a transport error succeeds: its status under the
    /// configured ``SuccessRule``s (a status below 400 without one). `false` for the series of
    /// transport errors (no status). The request point's `success`/`errors` and the interval
    /// aggregate's failed count both read it.
    let succeeds: Bool
    /// The endpoint's interval aggregate, which every request of this series adds to.
    let interval: EndpointInterval?

    init(
        _ key: SeriesKey,
        method: String,
        module: String,
        statusCode: Int?,
        succeeds: Bool,
        interval: EndpointInterval? = nil
    ) {
        self.key = key
        self.interval = interval
        self.id = key.bytes.withUnsafeBufferPointer(RecentInstants.seriesID)
        self.method = method
        self.module = module
        self.statusCode = statusCode
        self.succeeds = succeeds
    }

    /// Whether `sample` (whose URL it was rendered for) belongs to this series.
    func isSeries(of sample: RequestSample) -> Bool {
        statusCode == sample.statusCode && method == sample.method && module == sample.module
    }
}

/// The request's numeric fields, in the order they are written.
enum RequestNumericField: Int, CaseIterable {
    case duration, timeToFirstByte, domainLookup, connect, secureConnection
    case requestBytes, responseBytes, statusCode, success, errors, redirects, reusedConnection

    var name: String {
        typealias F = PointSchema.Field
        switch self {
        case .duration: return F.durationMilliseconds
        case .timeToFirstByte: return F.timeToFirstByteMilliseconds
        case .domainLookup: return F.domainLookupMilliseconds
        case .connect: return F.connectMilliseconds
        case .secureConnection: return F.secureConnectionMilliseconds
        case .requestBytes: return F.requestBytes
        case .responseBytes: return F.responseBytes
        case .statusCode: return F.statusCode
        case .success: return F.success
        case .errors: return F.errors
        case .redirects: return F.redirects
        case .reusedConnection: return F.reusedConnection
        }
    }

    var kind: NumericFieldGroup.Kind {
        switch self {
        case .duration, .timeToFirstByte, .domainLookup, .connect, .secureConnection: return .millionths
        case .requestBytes, .responseBytes: return .unsigned
        case .statusCode, .errors, .redirects: return .signed
        case .success, .reusedConnection: return .boolean
        }
    }
}

/// The keys of the request fields (``PointSchema/requestFields``), checked and escaped once.
struct RequestFieldKeys: Sendable {
    typealias F = PointSchema.Field
    // PointSchema's names are plain lowercase words: making their keys cannot fail (the tests write them all).
    let numeric = NumericFieldGroup(RequestNumericField.allCases.map { (try! FieldKey($0.name), $0.kind) })
    let error = try! FieldKey(F.error)
    let correlationID = try! FieldKey(F.correlationID)
    let networkProtocol = try! FieldKey(F.networkProtocol)
}
