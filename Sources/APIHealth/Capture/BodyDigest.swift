/// A digest of a response body, taken as its bytes stream through the capture (chunk by chunk, never
/// buffered), so the cache advisor can tell a body identical to the previous one of the same URL
/// (``CacheAdvisor``). 64 bits of a multiply-and-rotate per eight bytes: two bodies that differ share a
/// digest about once in 2⁶⁴, and a body that differs in one byte or in its length never does. It is not
/// a cryptographic hash (nobody can be fooled by it but the advisor's counts), and it never leaves the
/// process.
///
/// ```swift
/// var digest = BodyDigest()
/// for chunk in chunks { chunk.withUnsafeBytes { digest.update($0) } }
/// let sameAsBefore = digest.value == previous.value
/// ```
package struct BodyDigest: Sendable, Hashable {
    private static let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    /// The state over the whole words taken so far.
    private var state: UInt64 = 0x243F_6A88_85A3_08D3
    /// Bytes that do not make a whole word yet, little-endian, and how many.
    private var carry: UInt64 = 0
    private var carried = 0
    /// Bytes taken.
    package private(set) var length: UInt64 = 0

    /// A digest of no bytes yet.
    package init() {}

    /// A digest of no bytes yet, started from `seed`: digests with different seeds are independent hashes
    /// of the same bytes (the cache advisor's 128-bit keys are two).
    package init(seed: UInt64) { state = seed }

    /// Takes `bytes`, the next part of the body.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let count = bytes.count
        length &+= UInt64(count)
        var offset = 0
        // The bytes left over from the last chunk, completed into a word first.
        while carried > 0 && offset < count {
            carry |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) << UInt64(carried * 8)
            carried += 1
            offset += 1
            if carried == 8 {
                take(carry)
                carry = 0
                carried = 0
            }
        }
        var state = state
        while offset + 8 <= count {
            let mixed = (state ^ base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* Self.multiplier
            state = (mixed << 29) | (mixed >> 35)
            offset += 8
        }
        self.state = state
        while offset < count {
            carry |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) << UInt64(carried * 8)
            carried += 1
            offset += 1
        }
    }

    /// Takes `bytes`, the next part of the body.
    package mutating func update(_ bytes: some Sequence<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBytes { update($0) }
        }
    }

    private mutating func take(_ word: UInt64) {
        let mixed = (state ^ word) &* Self.multiplier
        state = (mixed << 29) | (mixed >> 35)
    }

    /// The digest of every byte taken, with their number.
    package var value: UInt64 {
        mix64(state ^ carry ^ (length &* 0xC2B2_AE3D_27D4_EB4F))
    }
}
