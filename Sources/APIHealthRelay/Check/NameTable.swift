import Foundation

/// A fixed table from short names to values, looked up by a cheap hash of the name's bytes (FNV-1a) and
/// confirmed by comparing the bytes: the schema check looks up every tag and field key of every line, as
/// written in the line, and a `Dictionary`'s per-process seeded hash of a `String` cost it more than the
/// rest of the check.
///
/// ```swift
/// let types = NameTable(["count": FieldType.int, "duration_ms_sum": .float])
/// types["count"]  // .int
/// line.withUnsafeBufferPointer { types[bytes: $0] }  // the same, from a line's bytes
/// ```
struct NameTable<Value: Sendable>: Sendable {
    /// Every name's bytes, one after another.
    private var storage: [UInt8] = []
    /// Per slot: where its name starts in `storage` and how long it is (-1: an empty slot).
    private var starts: [Int]
    private var lengths: [Int]
    private var values: [Value?]
    private let mask: Int

    init(_ entries: [String: Value]) {
        var capacity = 8
        while capacity < entries.count * 4 { capacity *= 2 }
        starts = Array(repeating: 0, count: capacity)
        lengths = Array(repeating: -1, count: capacity)
        values = Array(repeating: nil, count: capacity)
        mask = capacity - 1
        for (name, value) in entries {
            let bytes = Array(name.utf8)
            var slot = bytes.withUnsafeBufferPointer { Self.hash($0) } & mask
            while lengths[slot] >= 0 { slot = (slot + 1) & mask }
            starts[slot] = storage.count
            lengths[slot] = bytes.count
            values[slot] = value
            storage += bytes
        }
    }

    /// The value of the name `bytes` (as written: a name without escapes).
    @inline(__always)
    subscript(bytes name: UnsafeBufferPointer<UInt8>) -> Value? {
        var slot = Self.hash(name) & mask
        return storage.withUnsafeBufferPointer { storage in
            while lengths[slot] >= 0 {
                if lengths[slot] == name.count
                    && (name.isEmpty
                        || memcmp(storage.baseAddress! + starts[slot], name.baseAddress!, name.count) == 0)
                {
                    return values[slot]
                }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }

    subscript(_ name: String) -> Value? {
        var name = name
        return name.withUTF8 { self[bytes: $0] }
    }

    func contains(_ name: String) -> Bool { self[name] != nil }

    @inline(__always)
    static func hash(_ name: UnsafeBufferPointer<UInt8>) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: hash ^ (hash >> 29))
    }
}
