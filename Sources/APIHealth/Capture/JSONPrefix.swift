/// Tells a JSON document cut off before its end (a truncated body: valid so far, incomplete) from a
/// body that is not JSON at all (see ``ParseFailureKind/classify(_:data:)``).
///
/// ```swift
/// JSONPrefix.isCutOff(Array(#"{"id":7,"na"#.utf8))  // true
/// JSONPrefix.isCutOff(Array("<html>".utf8))         // false
/// ```
enum JSONPrefix {
    /// Whether `bytes` hold the start of a JSON text that ends too early: every byte fits the grammar,
    /// but the value is not complete. Empty (or whitespace-only) bytes are not a cut-off document.
    static func isCutOff(_ bytes: [UInt8]) -> Bool {
        var scanner = Scanner(bytes: bytes)
        // A UTF-8 byte order mark, as JSONSerialization accepts one.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { scanner.index = 3 }
        scanner.skipWhitespace()
        guard scanner.index < bytes.count else { return false }
        do throws(Scanner.Stop) {
            try scanner.value()
            return false
        } catch {
            return error == .cutOff
        }
    }

    private struct Scanner {
        enum Stop: Error { case cutOff, invalid }

        let bytes: [UInt8]
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// The next byte, or `cutOff` at the end.
        func peek() throws(Stop) -> UInt8 {
            guard index < bytes.count else { throw .cutOff }
            return bytes[index]
        }

        mutating func value() throws(Stop) {
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: "{"): try container(closing: UInt8(ascii: "}"), keyed: true)
            case UInt8(ascii: "["): try container(closing: UInt8(ascii: "]"), keyed: false)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw .invalid
            }
        }

        mutating func container(closing: UInt8, keyed: Bool) throws(Stop) {
            index += 1
            skipWhitespace()
            if try peek() == closing {
                index += 1
                return
            }
            while true {
                if keyed {
                    skipWhitespace()
                    guard try peek() == UInt8(ascii: "\"") else { throw .invalid }
                    try string()
                    skipWhitespace()
                    guard try peek() == UInt8(ascii: ":") else { throw .invalid }
                    index += 1
                }
                try value()
                skipWhitespace()
                let next = try peek()
                index += 1
                if next == closing { return }
                guard next == UInt8(ascii: ",") else { throw .invalid }
            }
        }

        mutating func string() throws(Stop) {
            index += 1
            while true {
                let byte = try peek()
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return
                case UInt8(ascii: "\\"):
                    let escaped = try peek()
                    index += 1
                    if escaped == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            guard try peek().isHexDigit else { throw .invalid }
                            index += 1
                        }
                    } else if !Array(#""\/bfnrt"#.utf8).contains(escaped) {
                        throw .invalid
                    }
                case 0..<0x20: throw .invalid
                default: break
                }
            }
        }

        mutating func literal(_ word: String) throws(Stop) {
            for byte in word.utf8 {
                guard try peek() == byte else { throw .invalid }
                index += 1
            }
        }

        /// A number, leniently: its characters up to the next delimiter; one that reaches the end may go on.
        mutating func number() throws(Stop) {
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                    UInt8(ascii: "e"), UInt8(ascii: "E"):
                    index += 1
                default: return
                }
            }
            throw .cutOff
        }
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
