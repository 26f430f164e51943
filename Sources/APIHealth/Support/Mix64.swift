/// SplitMix64's finaliser (Stafford's "variant 13"): a bijection of 64-bit values in which every output bit
/// depends on every input bit. The package's one mixer: the series cache's URL hash, the recent-instants
/// fingerprints and the tests' seeded generator all use it.
///
/// ```swift
/// let hash = mix64(UInt64(bitPattern: timestamp) ^ seriesIndex)
/// ```
@inlinable @inline(__always)
package func mix64(_ value: UInt64) -> UInt64 {
    var z = value
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}
