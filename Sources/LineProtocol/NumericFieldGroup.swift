/// Numeric fields whose keys are checked together, once, so a ``FieldWriter`` writes a line's
/// values for them without checking each field: the agent's request fields.
///
/// Each key has a kind that says how its value (an `Int64`) is written. A line writes the keys whose
/// bit is set in its `present` mask, in the order of the group.
///
/// ```swift
/// let group = NumericFieldGroup([
///     (try FieldKey("duration_ms"), .millionths), (try FieldKey("status_code"), .signed),
/// ])
/// withUnsafeTemporaryAllocation(of: Int64.self, capacity: group.count) { values in
///     values[0] = 12_345_678  // duration_ms=12.345678
///     values[1] = 200  // status_code=200i
///     fields.add(group, values: UnsafePointer(values.baseAddress!), present: 0b11)
/// }
/// ```
package struct NumericFieldGroup: Sendable {
    /// How a value is written.
    package enum Kind: Sendable {
        /// A float given as whole millionths, as ``FieldWriter/add(_:millionths:)`` writes it.
        case millionths
        /// A signed integer (`42i`).
        case signed
        /// An unsigned integer (`42u`), its bit pattern given.
        case unsigned
        /// A boolean: 0 is `false`, anything else `true`.
        case boolean
    }

    struct Entry {
        let words: (UInt64, UInt64, UInt64)
        let length: Int
        let kind: Kind
    }

    package let keys: [FieldKey]
    let entries: [Entry]
    /// The longest escaped key.
    let longestKey: Int
    /// The room every field of the group takes at most: `,key=` and its value.
    let room: Int
    /// The marks of every key.
    let marks: UInt64

    /// A group of distinct keys (at most 32).
    package init(_ fields: [(key: FieldKey, kind: Kind)]) {
        precondition(fields.count <= 32, "a group holds at most 32 fields")
        precondition(Set(fields.map(\.key)).count == fields.count, "a group's keys are distinct")
        keys = fields.map(\.key)
        entries = fields.map { Entry(words: $0.key.words, length: $0.key.escaped.count, kind: $0.kind) }
        longestKey = fields.map(\.key.escaped.count).max() ?? 0
        room = fields.reduce(0) { room, field in
            let value: Int
            switch field.kind {
            case .millionths: value = FieldWriter.millionthsRoom
            case .signed, .unsigned: value = FieldWriter.integerRoom
            case .boolean: value = FieldWriter.booleanRoom
            }
            return room + 1 + field.key.escaped.count + 1 + value
        }
        marks = fields.reduce(0) { $0 | $1.key.mark }
    }

    /// How many fields the group holds.
    package var count: Int { keys.count }
}

extension FieldWriter {
    /// Adds the fields of `group` whose bit is set in `present` (bit `i` for the group's `i`th
    /// key), each with its value from `values[i]`, in the group's order. They are written and
    /// counted exactly as one call of `add` per field would write them.
    ///
    /// The keys are checked once for the whole group: when the line has room for all of them, each
    /// fits after the series key, and none of them may already be on the line, the values are
    /// written without checking each field; otherwise each field is added with its own checks.
    package mutating func add(_ group: NumericFieldGroup, values: UnsafePointer<Int64>, present: UInt32) {
        guard !overflowed, group.longestKey <= FieldKey.wordBytes,
            seriesBytes + group.longestKey + 4 <= LineEncoder.maximumKeyLength,
            seen & group.marks == 0, writer.hasRoom(group.room + FieldKey.wordBytes)
        else {
            addEach(group, values: values, present: present)
            return
        }
        needed += group.room
        seen |= group.marks
        // Written through locals, which stay in registers: the line's bytes cannot alias them.
        var out = writer
        var written = count
        var clamped = 0
        let asSigned = writesUnsignedAsSigned
        group.entries.withUnsafeBufferPointer { entries in
            var remaining = present & (group.count == 32 ? ~0 : (1 << UInt32(group.count)) &- 1)
            while remaining != 0 {
                let index = remaining.trailingZeroBitCount
                remaining &= remaining &- 1
                let entry = entries[index]
                if written > 0 { out.append(UInt8(ascii: ",")) }
                out.append(words: entry.words, count: entry.length)
                out.append(UInt8(ascii: "="))
                written &+= 1
                let value = values[index]
                switch entry.kind {
                case .millionths: Self.appendMillionthsValue(value, into: &out)
                case .signed: Self.appendSignedValue(value, into: &out)
                case .unsigned:
                    if Self.appendUnsignedValue(UInt64(bitPattern: value), asSigned: asSigned, into: &out) {
                        clamped &+= 1
                    }
                case .boolean: Self.appendBooleanValue(value != 0, into: &out)
                }
            }
        }
        writer = out
        count = written
        if clamped > 0 { repairs.clampedUnsigned += clamped }
    }

    /// The group's fields one `add` at a time, each with its checks.
    private mutating func addEach(_ group: NumericFieldGroup, values: UnsafePointer<Int64>, present: UInt32) {
        for index in 0..<group.count where present & (1 << UInt32(index)) != 0 {
            let key = group.keys[index]
            let value = values[index]
            switch group.entries[index].kind {
            case .millionths: add(key, millionths: value)
            case .signed: add(key, value)
            case .unsigned: add(key, unsigned: UInt64(bitPattern: value))
            case .boolean: add(key, value != 0)
            }
        }
    }
}
