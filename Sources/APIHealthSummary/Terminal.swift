import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the summary needs to know about standard output: whether it is a terminal, how wide, and
/// whether colours are wanted there.
package enum Terminal {
    /// Whether standard output is a terminal.
    package static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// The width to draw in: the terminal's columns, else `$COLUMNS`, else `fallback`.
    package static func columns(fallback: Int = 120) -> Int {
        var size = winsize()
        if isTerminal, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let columns = Int(text), columns > 0 {
            return columns
        }
        return fallback
    }

    /// Colours for `choice` ("auto", "always" or "never"): auto means only on a terminal and only when
    /// `NO_COLOR` is not set (https://no-color.org).
    package static func wantsColors(_ choice: String) -> Bool {
        switch choice {
        case "always": return true
        case "never": return false
        default: return isTerminal && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
        }
    }
}

extension Terminal {
    /// The terminal's rows, or `nil` when standard output is not a terminal.
    package static var rows: Int? {
        var size = winsize()
        guard isTerminal, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return nil }
        return Int(size.ws_row)
    }

    /// Writes `text` to standard output in full (retrying short writes and interruptions).
    package static func write(_ text: String) {
        write(bytes: Array(text.utf8))
    }

    /// Writes `bytes` to standard output in full (retrying short writes and interruptions).
    package static func write(bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Foundation.write(STDOUT_FILENO, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}

extension Terminal {
    /// A text style, as the terminal's SGR code.
    package struct Style: Sendable {
        package let code: String

        package static let bold = Style(code: "1")
        package static let boldUnderlined = Style(code: "1;4")
        package static let dim = Style(code: "2")
        package static let red = Style(code: "31")
        package static let boldRed = Style(code: "1;31")
        package static let yellow = Style(code: "33")
        package static let cyan = Style(code: "36")
        package static let boldCyan = Style(code: "1;36")
    }

    /// `text` in `style` when `colors` is on (see ``wantsColors(_:)``), else `text` as it is.
    package static func paint(_ text: String, _ style: Style, colors: Bool) -> String {
        colors ? "\u{1B}[\(style.code)m\(text)\u{1B}[0m" : text
    }

    /// `text` with control characters written as visible escapes (C0 and DEL as `\xNN`, C1 as `\u{NN}`),
    /// so a tag value or a file name cannot move the cursor, change colours or clear the screen.
    package static func visible(_ text: String) -> String {
        func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                result += "\\x" + String(format: "%02x", scalar.value)
            } else if isControl(scalar) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
