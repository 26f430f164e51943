/// The line buckets of the most recently seen client addresses, at most `capacity` of them: when a new
/// client comes to a full table, the one seen longest ago gives up its place (its next write starts with
/// a full bucket). Memory is bounded whatever the number of clients: ``bytes(capacity:)``.
///
/// ```swift
/// var clients = ClientTable(capacity: 100_000)
/// let wait = clients.wait(client: "203.0.113.9", lines: 120, perMinute: 20_000, now: now)
/// ```
package struct ClientTable: Sendable {
    /// One client: the hash of its address, its bucket and its neighbours in recency order.
    private struct Entry: Sendable {
        var client: UInt64
        var bucket: LineBucket
        var newer: Int32
        var older: Int32
    }

    package let capacity: Int
    private var entries: [Entry] = []
    /// Where each client's entry is.
    private var index: [UInt64: Int32] = [:]
    /// The most and least recently seen (-1: none).
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    /// Clients that gave up their place to a newer one.
    package private(set) var evicted: UInt64 = 0

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
        entries.reserveCapacity(min(self.capacity, 4_096))
    }

    /// The most memory a table of `capacity` clients holds: its entries and its index (a dictionary
    /// slot of key, value and the table's spare room at its maximum load of 3/4).
    package static func bytes(capacity: Int) -> Int {
        let entry = MemoryLayout<Entry>.stride
        let slot = MemoryLayout<UInt64>.stride + MemoryLayout<Int32>.stride
        return capacity * entry + capacity * slot * 4 / 3 * 2
    }

    /// Clients kept now.
    package var count: Int { entries.count }

    /// How long `client`'s write of `lines` must wait (`nil`: now), the client made the most recent.
    package mutating func wait(client: UInt64, lines: Int, perMinute: Int, now: Duration) -> Duration? {
        let position = touch(client, perMinute: perMinute, now: now)
        return entries[Int(position)].bucket.wait(for: lines, perMinute: perMinute, now: now)
    }

    /// Takes `lines` from `client`'s bucket (after ``wait(client:lines:perMinute:now:)`` let them through).
    package mutating func take(client: UInt64, lines: Int) {
        guard let position = index[client] else { return }
        entries[Int(position)].bucket.take(lines)
    }

    /// The entry of `client`, made (in the place of the oldest when full) if missing, moved to the front.
    private mutating func touch(_ client: UInt64, perMinute: Int, now: Duration) -> Int32 {
        if let position = index[client] {
            unlink(position)
            link(position)
            return position
        }
        let position: Int32
        if entries.count < capacity {
            position = Int32(entries.count)
            entries.append(
                Entry(client: client, bucket: LineBucket(perMinute: perMinute, now: now), newer: -1, older: -1)
            )
        } else {
            position = oldest
            unlink(position)
            index[entries[Int(position)].client] = nil
            evicted += 1
            entries[Int(position)] = Entry(
                client: client,
                bucket: LineBucket(perMinute: perMinute, now: now),
                newer: -1,
                older: -1
            )
        }
        index[client] = position
        link(position)
        return position
    }

    private mutating func unlink(_ position: Int32) {
        let entry = entries[Int(position)]
        if entry.newer >= 0 { entries[Int(entry.newer)].older = entry.older } else { newest = entry.older }
        if entry.older >= 0 { entries[Int(entry.older)].newer = entry.newer } else { oldest = entry.newer }
        entries[Int(position)].newer = -1
        entries[Int(position)].older = -1
    }

    private mutating func link(_ position: Int32) {
        entries[Int(position)].older = newest
        entries[Int(position)].newer = -1
        if newest >= 0 { entries[Int(newest)].newer = position }
        newest = position
        if oldest < 0 { oldest = position }
    }

    /// The clients from the most recently seen to the least (for tests).
    package var clientsByRecency: [UInt64] {
        var result: [UInt64] = []
        var position = newest
        while position >= 0 {
            result.append(entries[Int(position)].client)
            position = entries[Int(position)].older
        }
        return result
    }
}
