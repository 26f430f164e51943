import Foundation

/// The JSON `influx-tail --format json` and the summary print: one object per line, written by `JSONEncoder`
/// (keys sorted, so the same rows print the same bytes).
///
/// ```swift
/// let line = JSONLines.line(JSONObject().adding("requests", 3).adding("p99_ms", JSONNumber(12.5)))
/// // {"p99_ms":12.5,"requests":3}\n
/// ```
///
/// JSONEncoder escapes the C0 controls; the C1 controls (U+0080…U+009F, among them the 8-bit CSI) and DEL are
/// escaped here as well, so that a spool line can never drive a terminal through JSON output.
package enum JSONLines {
    /// `value` as one line of JSON, with its line end.
    package static func line(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every value written is a string, a number, a bool, null, an array or an object of them: encoding cannot fail.
        let data = (try? encoder.encode(value)) ?? Data("null".utf8)
        var out = ""
        out.unicodeScalars.reserveCapacity(data.count + 1)
        for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
            if (0x7F...0x9F).contains(scalar.value) {
                out += String(format: "\\u%04x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\n"
    }
}

/// A JSON number as the tables print it: a whole value without a fraction (`20`, not `20.0`), `null` for NaN
/// and the infinities (which JSON cannot write).
package struct JSONNumber: Encodable, Sendable {
    package var value: Double?

    package init(_ value: Double?) { self.value = value }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        guard let value, value.isFinite else { return try container.encodeNil() }
        if value == value.rounded() && abs(value) < 1e15 {
            try container.encode(Int64(value))
        } else {
            try container.encode(value)
        }
    }
}

/// A JSON object built member by member (members whose value is `nil` are written as `null`; leave a member
/// out by not adding it).
package struct JSONObject: Encodable, Sendable {
    private var members: [(key: String, value: any Encodable & Sendable)] = []

    package init() {}

    /// The object with `key` set to `value` (`null` when `value` is `nil`).
    package func adding(_ key: String, _ value: (any Encodable & Sendable)?) -> JSONObject {
        var copy = self
        copy.members.append((key, value.map(OptionalValue.some) ?? OptionalValue.none))
        return copy
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for member in members {
            try container.encode(AnyEncodable(member.value), forKey: Key(member.key))
        }
    }

    private enum OptionalValue: Encodable, Sendable {
        case some(any Encodable & Sendable)
        case none

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .some(let value): try value.encode(to: encoder)
            case .none:
                var container = encoder.singleValueContainer()
                try container.encodeNil()
            }
        }
    }

    private struct AnyEncodable: Encodable {
        let value: any Encodable
        init(_ value: any Encodable) { self.value = value }
        func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
