/// One field value, in exactly the five types line protocol can carry.
///
/// ```swift
/// let fields: [Point.Field] = [
///     Point.Field("duration_ms", .float(12.5)),
///     Point.Field("status_code", .int(200)),
///     Point.Field("response_bytes", .uint(5120)),
///     Point.Field("error", .string("NSURLErrorDomain -1001")),
///     Point.Field("success", .bool(true)),
/// ]
/// ```
public enum FieldValue: Sendable, Hashable {
    /// A signed 64-bit integer, written with the `i` suffix (`42i`).
    case int(Int64)
    /// An unsigned 64-bit integer, written with the `u` suffix (`42u`). InfluxDB 1.x does not accept it.
    case uint(UInt64)
    /// A 64-bit float. NaN and ±infinity cannot be written: the encoder refuses such a field.
    case float(Double)
    /// A string, written in double quotes. Longer than ``LineEncoder/maximumStringBytes`` is truncated.
    case string(String)
    /// A boolean, written as `true` or `false`.
    case bool(Bool)
}

extension FieldValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension FieldValue: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .float(value) }
}

extension FieldValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension FieldValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension FieldValue: CustomStringConvertible {
    /// The value as line protocol writes it (strings unescaped, in quotes).
    public var description: String {
        switch self {
        case .int(let value): return "\(value)i"
        case .uint(let value): return "\(value)u"
        case .float(let value): return value.description
        case .string(let value): return "\"\(value)\""
        case .bool(let value): return value ? "true" : "false"
        }
    }
}
