/// Emptied line buffers with room for a whole batch, reused for new batches so their pages are not faulted
/// in anew (at most ``spareLimit`` kept).
struct BufferPool {
    static let spareLimit = 2

    /// The capacity a new batch's buffer gets: a full batch and the line that overflows it.
    let capacity: Int
    private var spares: [[UInt8]] = []

    init(capacity: Int) { self.capacity = capacity }

    /// Memory the spare buffers hold.
    var reservedBytes: Int { spares.reduce(0) { $0 + $1.capacity } }

    /// An empty buffer with room for a whole batch and the line that overflows it.
    mutating func take() -> [UInt8] {
        if let spare = spares.popLast() { return spare }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(capacity)
        return bytes
    }

    /// Keeps `buffer`, emptied, for a later batch if it has room for a whole one and fewer than
    /// ``spareLimit`` are kept (`buffer` is then left empty).
    mutating func give(_ buffer: inout [UInt8]) {
        guard buffer.capacity >= capacity, spares.count < Self.spareLimit else { return }
        buffer.removeAll(keepingCapacity: true)
        spares.append(buffer)
        buffer = []
    }

    /// A new array holding exactly `bytes`, without spare capacity.
    static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            _ = buffer.initialize(fromContentsOf: bytes)
            count = bytes.count
        }
    }
}
