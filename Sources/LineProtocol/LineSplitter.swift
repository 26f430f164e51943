/// Splits a buffer into lines at `\n`, except inside a quoted string field value.
package struct LineSplitter: Sequence, IteratorProtocol {
    /// One line: its 1-based number and its byte range, without the `\n`.
    package struct Line: Sendable {
        package var number: Int
        package var range: Range<Int>
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    private var number = 0

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    package mutating func next() -> Line? {
        guard position < bytes.count else { return nil }
        let start = position
        number += 1
        let startNumber = number
        // A quote opens a string only in the field set, after the first unescaped space, right after
        // an unescaped '=' (keys cannot hold '"' raw). Only newlines, backslashes, spaces and quotes
        // change that state, so the scan jumps from one of them to the next, eight bytes at a time.
        var inString = false
        var spaces = bytes[start] == UInt8(ascii: "#") ? -1 : 0
        var escapedByte = -1
        var index = start
        let count = bytes.count
        scanning: while index < count {
            if inString {
                index = firstIndex(in: bytes, from: index, where: Self.stringStops)
                guard index < count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\\"):
                    index += 2
                    continue
                case UInt8(ascii: "\""): inString = false
                default: number += 1  // a newline inside the string
                }
            } else {
                index = firstIndex(in: bytes, from: index, where: Self.stops)
                guard index < count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\n"):
                    break scanning
                case UInt8(ascii: "\\"):
                    // A backslash escapes the next byte, unless that is another backslash: then it is
                    // literal, and the second one is read in its turn.
                    if index + 1 < count && bytes[index + 1] == UInt8(ascii: "\\") {
                        index += 1
                    } else {
                        escapedByte = index + 1
                        index += 2
                    }
                    continue
                case UInt8(ascii: " "): spaces += 1
                default:
                    if spaces == 1 && index > start && bytes[index - 1] == UInt8(ascii: "=") && index - 1 != escapedByte
                    {
                        inString = true
                    }
                }
            }
            index += 1
        }
        let end = Swift.min(index, count)
        position = end + 1
        return Line(number: startNumber, range: start..<end)
    }

    /// Newlines, backslashes, spaces and quotes.
    @inline(__always)
    private static func stops(_ word: UInt64) -> UInt64 {
        let low7 = word & repeatedLowBits
        let plain =
            differs(low7, from: UInt8(ascii: "\n")) & differs(low7, from: UInt8(ascii: "\\"))
            & differs(low7, from: UInt8(ascii: " ")) & differs(low7, from: UInt8(ascii: "\""))
        return matches(word, plain: plain)
    }

    /// What ends or escapes inside a string value: backslashes and quotes (and newlines, counted).
    @inline(__always)
    private static func stringStops(_ word: UInt64) -> UInt64 {
        let low7 = word & repeatedLowBits
        let plain =
            differs(low7, from: UInt8(ascii: "\n")) & differs(low7, from: UInt8(ascii: "\\"))
            & differs(low7, from: UInt8(ascii: "\""))
        return matches(word, plain: plain)
    }
}
