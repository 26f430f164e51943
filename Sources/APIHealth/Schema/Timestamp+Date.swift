import Foundation
import LineProtocol

extension Timestamp {
    /// The instant of `date`, to the microsecond `Date` carries. A date more than 2⁶³ seconds from the
    /// epoch (or not a number) has no instant: it becomes the first or last one, which no precision
    /// can write, so a point at it is refused as out of range when it is encoded.
    ///
    /// ```swift
    /// let point = Point(measurement: "deploys", fields: ["count": 1], timestamp: Timestamp(date: Date()))
    /// ```
    ///
    /// - Parameter date: The instant.
    public init(date: Date) {
        let interval = date.timeIntervalSince1970
        guard interval.magnitude < 0x1p63 else {
            self.init(seconds: interval < 0 ? .min : .max, nanoseconds: 0)
            return
        }
        // Whole seconds toward negative infinity, and the rest (from 0 up to 10⁹ ns) rounded half up,
        // by conversions rather than calls into the math library: this runs for every request.
        var seconds = Int64(interval)
        if Double(seconds) > interval { seconds -= 1 }
        self.init(seconds: seconds, nanoseconds: Int64((interval - Double(seconds)) * 1e9 + 0.5))
    }
}
