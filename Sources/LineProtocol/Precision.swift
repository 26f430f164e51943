/// The unit of a line's timestamp, as the write API's `precision` parameter names it.
///
/// ```swift
/// Precision(rawValue: "ms")  // .ms
/// Precision.us.nanosecondsPerUnit  // 1_000
/// ```
public enum Precision: String, Sendable, CaseIterable, Hashable {
    /// Nanoseconds.
    case ns
    /// Microseconds.
    case us
    /// Milliseconds.
    case ms
    /// Seconds.
    case s

    /// How many nanoseconds one unit holds.
    public var nanosecondsPerUnit: Int64 {
        switch self {
        case .ns: return 1
        case .us: return 1_000
        case .ms: return 1_000_000
        case .s: return 1_000_000_000
        }
    }
}
