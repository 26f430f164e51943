import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the summary needs to know about standard output: whether it is a terminal, how wide, and
/// whether colours are wanted there.
public enum Terminal {
    /// Whether standard output is a terminal.
    public static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// The width to draw in: the terminal's columns, else `$COLUMNS`, else `fallback`.
    public static func columns(fallback: Int = 120) -> Int {
        var size = winsize()
        if isTerminal, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let columns = Int(text), columns > 0 { return columns }
        return fallback
    }

    /// Colours for `choice` ("auto", "always" or "never"): auto means only on a terminal and only when
    /// `NO_COLOR` is not set (https://no-color.org).
    public static func wantsColors(_ choice: String) -> Bool {
        switch choice {
        case "always": return true
        case "never": return false
        default: return isTerminal && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
        }
    }
}

extension Terminal {
    /// The terminal's rows, or `nil` when standard output is not a terminal.
    public static var rows: Int? {
        var size = winsize()
        guard isTerminal, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return nil }
        return Int(size.ws_row)
    }

    /// Writes `text` to standard output in full (retrying short writes and interruptions).
    public static func write(_ text: String) {
        let bytes = Array(text.utf8)
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
