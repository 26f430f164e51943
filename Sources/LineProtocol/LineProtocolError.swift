/// Why a point could not be written as a line at all.
///
/// Smaller problems (a NaN field, an empty tag value, a control character in a key) do not throw: the
/// encoder applies the documented repair and reports it in ``LineEncoder/Repairs``.
public enum LineProtocolError: Error, Sendable, Hashable {
    /// The measurement is empty (or only trailing backslashes, which are stripped).
    case emptyMeasurement
    /// The measurement starts with `_` (reserved by InfluxDB) or `#` (it would read as a comment).
    case reservedMeasurement(String)
    /// No field remained writable: a line needs at least one.
    case noFields
    /// The timestamp does not fit an `Int64` at the chosen precision, or InfluxDB's range.
    case timestampOutOfRange(Timestamp, Precision)
    /// The series key is too long for any of the point's field keys: series key, field key and 4 bytes
    /// would take this many bytes, over ``LineEncoder/maximumKeyLength`` (InfluxDB 1.x refuses such a line).
    case keyTooLong(Int)
    /// The `adjustingTimestamp` closure declined the point (the agent does when the point's series has
    /// no free instant near its time).
    case timestampDeclined
    /// A ``FieldKey`` cannot be made of this name: the encoder would drop or repair it.
    case unwritableFieldKey(String)
}

extension LineProtocolError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .emptyMeasurement: return "the measurement is empty"
        case .reservedMeasurement(let name): return "the measurement \"\(name)\" starts with a reserved character"
        case .noFields: return "the point has no writable field"
        case .timestampOutOfRange(let t, let p):
            return "the timestamp \(t.seconds)s+\(t.nanoseconds)ns does not fit precision \(p.rawValue)"
        case .keyTooLong(let length):
            return
                "series key, field key and 4 bytes take \(length) bytes, over InfluxDB's \(LineEncoder.maximumKeyLength)"
        case .timestampDeclined: return "no timestamp was given for the point's series (its instants are taken)"
        case .unwritableFieldKey(let name): return "the field key \"\(name)\" is empty, reserved or needs repair"
        }
    }
}
