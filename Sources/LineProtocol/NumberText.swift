/// Appends the decimal digits of `value`.
@inline(__always)
func appendDecimal(_ value: UInt64, into buffer: inout ByteWriter) {
    if value < 10 {
        buffer.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
        return
    }
    // Four digits at a time (two pairs, each stored as one 16-bit word), written backwards from the
    // end of the number.
    let width = decimalWidth(value)
    let pairs = UnsafeRawPointer(digitPairs.utf8Start)
    let digits = UnsafeMutableRawPointer(buffer.base + buffer.count)
    /// Stores the two digits of `pair` (below 100) to end at `end`.
    @inline(__always) func store(_ pair: Int, endingAt end: Int) {
        let text = pairs.loadUnaligned(fromByteOffset: pair &* 2, as: UInt16.self)
        digits.storeBytes(of: text, toByteOffset: end &- 2, as: UInt16.self)
    }
    var end = width
    var rest = value
    while rest >= 10_000 {
        let (quotient, remainder) = rest.quotientAndRemainder(dividingBy: 10_000)
        let (high, low) = UInt32(truncatingIfNeeded: remainder).quotientAndRemainder(dividingBy: 100)
        store(Int(low), endingAt: end)
        store(Int(high), endingAt: end &- 2)
        end &-= 4
        rest = quotient
    }
    if rest >= 100 {
        let (quotient, remainder) = rest.quotientAndRemainder(dividingBy: 100)
        store(Int(remainder), endingAt: end)
        end &-= 2
        rest = quotient
    }
    if rest >= 10 {
        store(Int(rest), endingAt: end)
    } else {
        let digit = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        digits.storeBytes(of: digit, toByteOffset: end &- 1, as: UInt8.self)
    }
    buffer.advance(by: width)
}

/// "00" through "99", for writing two digits at once.
let digitPairs: StaticString =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

@inline(__always)
func appendDecimal(_ value: Int64, into buffer: inout ByteWriter) {
    if value < 0 {
        buffer.append(UInt8(ascii: "-"))
        appendDecimal(value.magnitude, into: &buffer)
    } else {
        appendDecimal(UInt64(value), into: &buffer)
    }
}

/// Appends a finite double as text that reads back to exactly the same value.
///
/// Values that are a whole number of millionths below 2⁵³ millionths (every duration in milliseconds
/// from a nanosecond clock) are written with integer arithmetic, `12.345678`; the rest use Swift's
/// shortest round-trip text (`1e-05`, `1.7976931348623157e+308`).
@inline(__always)
func appendFloat(_ value: Double, into buffer: inout ByteWriter) {
    let product = value * 1_000_000
    // Rounded by conversion (half away from zero), not `rounded()`: this module links no libm.
    if product.magnitude < 9_007_199_254_740_992, value != 0 || value.sign == .plus,
        case let micros = Int64(product + (product < 0 ? -0.5 : 0.5)), Double(micros) / 1_000_000 == value
    {
        // The decimal n / 10⁶ reads back as the double nearest to it, which is what dividing computes.
        if micros < 0 { buffer.append(UInt8(ascii: "-")) }
        let (whole, fraction) = micros.magnitude.quotientAndRemainder(dividingBy: 1_000_000)
        appendDecimal(whole, into: &buffer)
        buffer.append(UInt8(ascii: "."))
        appendMillionths(fraction, into: &buffer)
        return
    }
    let text = value.description
    withUTF8Bytes(text) { bytes in
        buffer.append(contentsOf: bytes)
    }
}

/// Writes `fraction` (below 10⁶) as the digits after a decimal point: six digits without their
/// trailing zeros (`345000` → `345`, `5` → `000005`), or `0` for zero. The six are written two at a
/// time, then the zeros at the end are taken back.
@inline(__always)
func appendMillionths(_ fraction: UInt64, into buffer: inout ByteWriter) {
    if fraction == 0 {
        buffer.append(UInt8(ascii: "0"))
        return
    }
    let pairs = digitPairs.utf8Start
    let (high, low) = fraction.quotientAndRemainder(dividingBy: 10_000)
    let (middle, last) = low.quotientAndRemainder(dividingBy: 100)
    let start = buffer.count
    let first = Int(truncatingIfNeeded: high) &* 2
    let second = Int(truncatingIfNeeded: middle) &* 2
    let third = Int(truncatingIfNeeded: last) &* 2
    buffer.append(pairs[first], pairs[first &+ 1], pairs[second], pairs[second &+ 1])
    buffer.append(pairs[third])
    buffer.append(pairs[third &+ 1])
    var end = start + 6
    while buffer.base[end - 1] == UInt8(ascii: "0") { end -= 1 }
    buffer.rewind(to: end)
}

@inline(__always)
func decimalWidth(_ value: UInt64) -> Int {
    // Approximate from the bit length (log10(2) ≈ 1233 / 4096), then correct by one comparison.
    let bits = 64 - value.leadingZeroBitCount
    let estimate = (bits &* 1233) >> 12
    return max(estimate + (value >= powersOfTen[estimate] ? 1 : 0), 1)
}

let powersOfTen: [UInt64] = [
    1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000,
    100_000_000_000, 1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000, 1_000_000_000_000_000,
    10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
]
