/// Where each part of one line stands, as ``LineParser/scanLine(_:lineNumber:into:)`` found them: byte
/// ranges into the line, names as written (escapes and all), nothing built. One value is reused line after
/// line, so scanning allocates nothing once its arrays have grown to the longest line's tags and fields.
///
/// ```swift
/// var spans = LineSpans()
/// if try parser.scanLine(line, into: &spans) {
///     let measurement = UnsafeBufferPointer(rebasing: line[spans.measurement])
/// }
/// ```
package struct LineSpans: Sendable {
    /// How a field value is written.
    package enum Kind: Sendable, Hashable {
        /// `1.5`, `-2`, `1e3`.
        case float
        /// `12i`.
        case int
        /// `12u`.
        case uint
        /// `t`, `true`, `F`, ….
        case bool
        /// `"text"`, quotes included in its range.
        case string
    }

    /// One tag: its key and value as written.
    package struct Tag: Sendable {
        package var key: Range<Int>
        package var value: Range<Int>
    }

    /// One field: its key and value as written, and the value's kind.
    package struct Field: Sendable {
        package var key: Range<Int>
        package var value: Range<Int>
        package var kind: Kind
    }

    /// The measurement as written.
    package var measurement: Range<Int> = 0..<0
    /// The tags, in the order written (the first starts after the measurement's comma).
    package var tags: [Tag] = []
    /// The fields, in the order written.
    package var fields: [Field] = []
    /// The timestamp, in the parser's precision; `nil` when the line has none.
    package var timestamp: Int64?
    /// Whether the line holds a backslash or, inside a string value, a line break or carriage return:
    /// bytes that readers unescape or split differently, which a caller copying the line as written may
    /// want to leave to a careful path.
    package var hasEscapesOrLineBreaks = false
    /// Whether fields are kept (tags always are: the parser compares their keys).
    let keepsFields: Bool

    /// Spans for ``LineParser/scanLine(_:lineNumber:into:)``.
    package init() {
        keepsFields = true
    }

    /// Spans that keep only what the parser itself needs: for the paths that build a point or only check.
    init(keepingFields: Bool) {
        keepsFields = keepingFields
    }

    /// Forgets the last line, keeping the room.
    mutating func reset() {
        measurement = 0..<0
        tags.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
        timestamp = nil
        hasEscapesOrLineBreaks = false
    }

    /// The end of the measurement and tags: where the space before the fields is.
    package var seriesEnd: Int { tags.last?.value.upperBound ?? measurement.upperBound }
}
