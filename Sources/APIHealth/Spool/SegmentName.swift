/// The names of spool segments, in one place: a segment's stem sorts in send order, and its files are
/// `<stem>.open.lp` while lines are appended and `<stem>.lp` once sealed.
///
/// A stem is a 20-digit sequence number, then `-` and more digits for each join or split that made it:
/// `00000000000000000042` (batch 42), `00000000000000000057-00000000000000000103` (a backlog joined up to
/// batch 57, as join 103), `00000000000000000042-1` and `…-2` (the halves of batch 42 after a 413). A file
/// of any other name is not the agent's: it is never read, sent or removed.
package enum SegmentName {
    /// The sealed file's suffix.
    package static let sealedSuffix = ".lp"
    /// The open file's suffix (lines still being appended).
    package static let openSuffix = ".open.lp"

    /// The stem of batch `sequence`.
    package static func sequence(_ sequence: UInt64) -> String {
        let digits = String(sequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    /// The stem of a join of batches up to `last`, made as join `sequence`: it sorts where `last` did.
    package static func merged(last: String, sequence: UInt64) -> String {
        leadingSequence(last) + "-" + Self.sequence(sequence)
    }

    /// The stems of the two halves of `stem`.
    package static func halves(of stem: String) -> (first: String, second: String) {
        (stem + "-1", stem + "-2")
    }

    /// The sequence a stem starts with (its send order).
    package static func leadingSequence(_ stem: String) -> String { String(stem.prefix { $0.isNumber }) }

    /// Every sequence number in a stem (restoring continues after the highest).
    package static func sequences(in stem: String) -> [UInt64] {
        stem.split(separator: "-").compactMap { UInt64($0) }
    }

    package static func openFile(_ stem: String) -> String { stem + openSuffix }
    package static func sealedFile(_ stem: String) -> String { stem + sealedSuffix }

    /// The stem of a segment file name and whether it is open; `nil` for a name the agent never gives.
    package static func parse(fileName name: String) -> (stem: String, isOpen: Bool)? {
        let isOpen = name.hasSuffix(openSuffix)
        guard isOpen || name.hasSuffix(sealedSuffix) else { return nil }
        let stem = String(name.dropLast(isOpen ? openSuffix.count : sealedSuffix.count))
        return isStem(stem) ? (stem, isOpen) : nil
    }

    /// Whether `stem` is a name the agent gives: 20 digits, then `-` and digits any number of times.
    package static func isStem(_ stem: String) -> Bool {
        let parts = stem.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard let first = parts.first, first.count == 20 else { return false }
        return parts.allSatisfy { part in !part.isEmpty && part.count <= 20 && part.allSatisfy { $0 >= 48 && $0 <= 57 }
        }
    }
}
