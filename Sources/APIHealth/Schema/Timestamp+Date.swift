import Foundation
import LineProtocol

extension Timestamp {
    /// The instant of `date`, to the microsecond `Date` carries.
    ///
    /// ```swift
    /// let point = Point(measurement: "deploys", fields: ["count": 1], timestamp: Timestamp(date: Date()))
    /// ```
    ///
    /// - Parameter date: The instant.
    public init(date: Date) {
        let interval = date.timeIntervalSince1970
        let seconds = interval.rounded(.down)
        self.init(seconds: Int64(seconds), nanoseconds: Int64(((interval - seconds) * 1e9).rounded()))
    }
}
