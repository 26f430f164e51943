/// Eight bytes at a time: tests on a 64-bit word that say which of its bytes are one of a few values.
///
/// Words are loaded little-endian (every platform Swift targets here), so the lowest flagged bit
/// belongs to the first matching byte in memory.
let repeatedOnes: UInt64 = 0x0101_0101_0101_0101
let repeatedHighBits: UInt64 = 0x8080_8080_8080_8080
let repeatedLowBits: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

/// The high bit of each byte of `low7` (bytes of 0x00–0x7F) set where that byte differs from `byte`.
/// No byte carries into the next, as each sum is at most 0xFE, so the answer is exact per byte.
@inline(__always)
func differs(_ low7: UInt64, from byte: UInt8) -> UInt64 {
    (low7 ^ (repeatedOnes &* UInt64(byte))) &+ repeatedLowBits
}

/// The high bit of each byte of `word` set where it is one of the ASCII bytes whose `differs` masks
/// were and-ed into `plain` (computed from `word & repeatedLowBits`).
@inline(__always)
func matches(_ word: UInt64, plain: UInt64) -> UInt64 {
    ~(plain | word) & repeatedHighBits
}

/// The index of the first byte at or after `start` for which `flags` marks a match in its word, or
/// `bytes.count`.
@inline(__always)
func firstIndex(
    in bytes: UnsafeBufferPointer<UInt8>,
    from start: Int,
    where flags: (UInt64) -> UInt64
) -> Int {
    guard let base = bytes.baseAddress else { return bytes.count }
    let raw = UnsafeRawPointer(base)
    var index = start
    while index + 8 <= bytes.count {
        let found = flags(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
        if found != 0 { return index + found.trailingZeroBitCount / 8 }
        index += 8
    }
    if index < bytes.count {
        // The last few bytes, padded with a letter no test flags.
        var word: UInt64 = 0x6161_6161_6161_6161
        withUnsafeMutableBytes(of: &word) { padded in
            padded.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[index...]))
        }
        let found = flags(word)
        if found != 0 { return index + found.trailingZeroBitCount / 8 }
    }
    return bytes.count
}

/// Whether every byte is below 0x80.
@inline(__always)
func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    let raw = UnsafeRawPointer(base)
    var highBits: UInt64 = 0
    var index = 0
    while index + 8 <= bytes.count {
        highBits |= raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
        index += 8
    }
    while index < bytes.count {
        highBits |= UInt64(bytes[index])
        index += 1
    }
    return highBits & repeatedHighBits == 0
}
