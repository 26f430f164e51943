/// A fixed table from short names to values, looked up by a cheap hash of the name's bytes (FNV-1a) and
/// confirmed by comparing the name: the schema check looks up every tag and field key of every line, and a
/// `Dictionary`'s per-process seeded hash of a `String` cost it more than the rest of the check.
///
/// ```swift
/// let types = NameTable(["count": FieldType.int, "duration_ms_sum": .float])
/// types["count"]  // .int
/// ```
struct NameTable<Value: Sendable>: Sendable {
    private var names: [String?]
    private var values: [Value?]
    private let mask: Int

    init(_ entries: [String: Value]) {
        var capacity = 8
        while capacity < entries.count * 4 { capacity *= 2 }
        names = Array(repeating: nil, count: capacity)
        values = Array(repeating: nil, count: capacity)
        mask = capacity - 1
        for (name, value) in entries {
            var slot = Self.hash(name) & mask
            while names[slot] != nil { slot = (slot + 1) & mask }
            names[slot] = name
            values[slot] = value
        }
    }

    subscript(_ name: String) -> Value? {
        var slot = Self.hash(name) & mask
        while let candidate = names[slot] {
            if candidate == name { return values[slot] }
            slot = (slot + 1) & mask
        }
        return nil
    }

    func contains(_ name: String) -> Bool { self[name] != nil }

    @inline(__always)
    static func hash(_ name: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: hash ^ (hash >> 29))
    }
}
