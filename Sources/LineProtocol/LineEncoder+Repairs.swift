/// The checks and repairs the encoder applies to names, tags and fields before it writes them.
extension LineEncoder {
    static func checkMeasurement(_ measurement: String, repairs: inout Repairs) throws(LineProtocolError) {
        let shape = NameShape(measurement, .measurement)
        if shape.isEmpty { throw .emptyMeasurement }
        if let first = measurement.utf8.first, first == UInt8(ascii: "_") || first == UInt8(ascii: "#") {
            throw .reservedMeasurement(measurement)
        }
        if shape.needsRepair { repairs.repairedNames += 1 }
    }

    /// Whether a tag key or field key may be written at all.
    @inline(__always)
    static func isWritableKey(_ key: String, _ position: NamePosition) -> Bool {
        let plain = withUTF8Bytes(key) { bytes -> Bool? in
            guard let first = bytes.first, first != UInt8(ascii: "_") else { return false }
            for byte in bytes where byte == UInt8(ascii: "\\") || isControl(byte) { return nil }
            // "time" is the timestamp column: InfluxDB refuses it as a tag or field key.
            return
                !(bytes.count == 4 && bytes[0] == UInt8(ascii: "t") && bytes[1] == UInt8(ascii: "i")
                && bytes[2] == UInt8(ascii: "m") && bytes[3] == UInt8(ascii: "e"))
        }
        if let plain { return plain }
        let shape = NameShape(key, position)
        if shape.isEmpty { return false }
        return !repairedName(key, position).utf8.elementsEqual("time".utf8)
    }

    @inline(__always)
    static func isWritable(_ field: Point.Field) -> Bool {
        if case .float(let value) = field.value, !value.isFinite { return false }
        return isWritableKey(field.key, .fieldKey)
    }

    /// Whether the field at `index` is written: it is writable and no later field has the same key.
    @inline(__always)
    static func isWritten(_ fields: [Point.Field], at index: Int) -> Bool {
        guard isWritable(fields[index]) else { return false }
        let key = fields[index].key
        var later = index + 1
        while later < fields.count {
            if sameBytes(fields[later].key, key) { return false }
            later += 1
        }
        return true
    }

    static func checkFields(_ fields: [Point.Field], repairs: inout Repairs) throws(LineProtocolError) {
        // The last field is always the last of its key, so this usually stops at once.
        var index = fields.count - 1
        while index >= 0 {
            if isWritten(fields, at: index) { return }
            index -= 1
        }
        throw .noFields
    }

    /// Appends `,key=value` for each writable tag, sorted by the key's bytes, the last of equal keys kept.
    static func appendTags(_ tags: [Point.Tag], into buffer: inout ByteWriter, repairs: inout Repairs) {
        if tags.isEmpty { return }
        // Keys that need repair could become equal to another key once repaired: sort and deduplicate
        // the repaired forms instead (rare, and allowed to allocate).
        for tag in tags where needsRepair(tag.key, .tag) {
            appendTags(repairedTags(tags, repairs: &repairs), into: &buffer, repairs: &repairs)
            return
        }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: tags.count) { order in
            for index in 0..<tags.count { order[index] = index }
            // Insertion sort (stable): the number of tags is small.
            for index in 1..<max(tags.count, 1) {
                let moving = order[index]
                var slot = index
                while slot > 0 && precedes(tags[moving].key, tags[order[slot - 1]].key) {
                    order[slot] = order[slot - 1]
                    slot -= 1
                }
                order[slot] = moving
            }
            for position in 0..<tags.count {
                let tag = tags[order[position]]
                if position + 1 < tags.count && sameBytes(tags[order[position + 1]].key, tag.key) {
                    repairs.droppedTags += 1
                    continue
                }
                guard isWritableKey(tag.key, .tag) else {
                    repairs.droppedTags += 1
                    continue
                }
                if tag.value.isEmpty || needsRepair(tag.value, .tag) {
                    let valueShape = NameShape(tag.value, .tag)
                    if valueShape.isEmpty {
                        repairs.droppedTags += 1
                        continue
                    }
                    repairs.repairedNames += 1
                }
                buffer.append(UInt8(ascii: ","))
                appendName(tag.key, .tag, into: &buffer)
                buffer.append(UInt8(ascii: "="))
                appendName(tag.value, .tag, into: &buffer)
            }
        }
    }

    /// Whether `name` holds a byte that a repair could change (a backslash or a control character).
    @inline(__always)
    static func needsRepair(_ name: String, _ position: NamePosition) -> Bool {
        withUTF8Bytes(name) { bytes in
            for byte in bytes where byte == UInt8(ascii: "\\") || isControl(byte) {
                return NameShape(name, position).needsRepair
            }
            return false
        }
    }

    /// The tags with their keys repaired (so equal repaired keys collapse), counting each repaired key.
    static func repairedTags(_ tags: [Point.Tag], repairs: inout Repairs) -> [Point.Tag] {
        tags.map { tag in
            guard NameShape(tag.key, .tag).needsRepair else { return tag }
            repairs.repairedNames += 1
            return Point.Tag(repairedName(tag.key, .tag), tag.value)
        }
    }

    /// `name` as ``NameShape`` repairs it, unescaped.
    static func repairedName(_ name: String, _ position: NamePosition) -> String {
        let escaped = ByteWriter.collect(bound: nameBound(name)) { appendName(name, position, into: &$0) }
        var repaired: [UInt8] = []
        var index = 0
        while index < escaped.count {
            if escaped[index] == UInt8(ascii: "\\") && index + 1 < escaped.count
                && position.needsEscape(escaped[index + 1])
            {
                index += 1
            }
            repaired.append(escaped[index])
            index += 1
        }
        return String(decoding: repaired, as: UTF8.self)
    }
}

/// Whether two strings have the same UTF-8 bytes (not merely canonically equal, as `==` checks).
@inline(__always)
func sameBytes(_ lhs: String, _ rhs: String) -> Bool {
    if lhs.utf8.count != rhs.utf8.count { return false }
    return withUTF8Bytes(lhs) { left in
        withUTF8Bytes(rhs) { right in
            left.count == right.count && (left.count == 0 || memcmpEqual(left, right))
        }
    }
}

@inline(__always)
func memcmpEqual(_ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>) -> Bool {
    for index in 0..<left.count where left[index] != right[index] { return false }
    return true
}

/// Byte-order comparison of two strings' UTF-8, as InfluxDB sorts tag keys.
@inline(__always)
func precedes(_ lhs: String, _ rhs: String) -> Bool {
    withUTF8Bytes(lhs) { left in
        withUTF8Bytes(rhs) { right in
            let common = min(left.count, right.count)
            for index in 0..<common where left[index] != right[index] {
                return left[index] < right[index]
            }
            return left.count < right.count
        }
    }
}
