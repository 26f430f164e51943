import LineProtocol

/// The documented repairs, written plainly over Unicode scalars.
public enum LineProtocolModel {
    /// A name as the encoder repairs it: runs of backslashes before the end or before a character the
    /// position escapes are removed; line feeds and carriage returns become U+FFFD, and so do a NUL or
    /// tab first in a measurement or field key (the positions where a quote is escapable too).
    public static func repaired(_ name: String, quoteIsEscapable: Bool = false) -> String {
        let specials: Set<Unicode.Scalar> = quoteIsEscapable ? [",", " ", "=", "\""] : [",", " ", "="]
        let scalars = Array(name.unicodeScalars)
        var result = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            if scalars[index] == "\\" {
                var end = index
                while end < scalars.count && scalars[end] == "\\" { end += 1 }
                if end < scalars.count && !specials.contains(scalars[end]) {
                    result.append(contentsOf: scalars[index..<end])
                }
                index = end
                continue
            }
            let scalar = scalars[index]
            let lineBreak = scalar == "\n" || scalar == "\r"
            let leadingBlank = index == 0 && quoteIsEscapable && (scalar == "\u{0}" || scalar == "\t")
            result.append(lineBreak || leadingBlank ? "\u{FFFD}" : scalar)
            index += 1
        }
        return String(result)
    }

    /// A string value as the encoder writes it (short of truncation): line feeds and carriage returns
    /// become U+FFFD.
    public static func stringValue(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.map { $0 == "\n" || $0 == "\r" ? "\u{FFFD}" : $0 }))
    }

    public static func writableKey(_ key: String, field: Bool = false) -> Bool {
        let kept = repaired(key, quoteIsEscapable: field)
        return !kept.isEmpty && !key.hasPrefix("_") && Array(kept.utf8) != Array("time".utf8)
    }

    static func lastOccurrences<T>(_ items: [T], key: (T) -> [UInt8]) -> [T] {
        items.enumerated().filter { entry in
            !items[(entry.offset + 1)...].contains { key($0) == key(entry.element) }
        }.map(\.element)
    }

    public enum Outcome: Equatable {
        case point(Point)
        case refused(LineProtocolError)
    }

    public static func expected(_ point: Point, precision: Precision) -> Outcome {
        let measurement = repaired(point.measurement, quoteIsEscapable: true)
        if measurement.isEmpty { return .refused(.emptyMeasurement) }
        if point.measurement.hasPrefix("_") || point.measurement.hasPrefix("#") {
            return .refused(.reservedMeasurement(point.measurement))
        }
        var timestamp: Timestamp?
        if let given = point.timestamp {
            guard let value = given.value(in: precision) else {
                return .refused(.timestampOutOfRange(given, precision))
            }
            timestamp = Timestamp(value, precision: precision)
        }
        let fields = lastOccurrences(point.fields) { Array($0.key.utf8) }.filter { field in
            if case .float(let value) = field.value, !value.isFinite { return false }
            return writableKey(field.key, field: true)
        }.map { field -> Point.Field in
            if case .string(let value) = field.value {
                return Point.Field(repaired(field.key, quoteIsEscapable: true), .string(stringValue(value)))
            }
            return Point.Field(repaired(field.key, quoteIsEscapable: true), field.value)
        }
        if fields.isEmpty { return .refused(.noFields) }
        let tags = lastOccurrences(point.tags.map { Point.Tag(repaired($0.key), $0.value) }) { Array($0.key.utf8) }
            .filter { writableKey($0.key) && !repaired($0.value).isEmpty }
            .map { Point.Tag($0.key, repaired($0.value)) }
            .sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        return .point(Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp))
    }
}
