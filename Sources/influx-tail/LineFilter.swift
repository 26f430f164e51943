import LineProtocol

/// `--measurement` and `--where` filters.
struct LineFilter {
    var measurement: String?
    var tags: [(String, String)]

    init(measurement: String?, tags: [String]) {
        self.measurement = measurement
        self.tags = tags.map { filter in
            let parts = filter.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    var isEmpty: Bool { measurement == nil && tags.isEmpty }

    func matches(_ line: [UInt8]) -> Bool {
        if isEmpty { return true }
        guard let point = try? LineParser().parseLine(line) else { return false }
        return matches(point)
    }

    func matches(_ point: Point) -> Bool {
        if let measurement, point.measurement != measurement { return false }
        return tags.allSatisfy { point.tag($0.0) == $0.1 }
    }
}
