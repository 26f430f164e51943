import LineProtocol

/// Makes the request body of a batch: gzip at the configured level, of the lines as every destination
/// takes them. One body serves every destination; a destination that wants it plain or at a coarser
/// precision makes its own form from it (``Shipper``).
///
/// ```swift
/// let compressor = BatchCompressor(level: 1, writesUnsignedAsSigned: false)
/// let made = compressor.body(of: Array("m v=1i 1\n".utf8), keeping: GzipWorkspace())
/// ```
struct BatchCompressor: Sendable {
    /// zlib level.
    let level: Int
    /// Whether unsigned values go out as integers (a v1 destination is among them).
    let writesUnsignedAsSigned: Bool

    /// A compressor at `level`.
    ///
    /// - Parameters:
    ///   - level: The gzip level.
    ///   - writesUnsignedAsSigned: Whether unsigned values go out as integers.
    init(level: Int, writesUnsignedAsSigned: Bool) {
        self.level = level
        self.writesUnsignedAsSigned = writesUnsignedAsSigned
    }

    /// A compressor for `configuration`'s destinations: its gzip level, and integers for unsigned values
    /// when a v1 destination is among them.
    ///
    /// - Parameter configuration: The agent's settings.
    init(configuration: APIHealthConfiguration) {
        self.init(level: configuration.gzipLevel, writesUnsignedAsSigned: configuration.writesUnsignedAsSigned)
    }

    /// The request body of `lines`, and how many lines had a value clamped on the way; `nil` if gzip
    /// failed.
    ///
    /// - Parameters:
    ///   - lines: Line protocol.
    ///   - workspace: The caller's gzip memory, kept between its compressions (`nil`: memory of its own).
    /// - Returns: The gzip body and the lines clamped.
    func body(of lines: [UInt8], keeping workspace: GzipWorkspace?) -> (body: [UInt8], linesClamped: Int)? {
        var payload = lines
        var clamped = 0
        if writesUnsignedAsSigned {
            // Lines kept from before (or recorded with no v1 destination) may carry unsigned values,
            // which InfluxDB 1.x refuses: they go out as integers, clamped values counted once.
            let rewrite = LineEncoder.rewritingUnsignedAsSigned(lines)
            if rewrite.rewrittenFields > 0 { payload = rewrite.lines }
            clamped = rewrite.clampedLines
        }
        var body: [UInt8] = []
        guard (try? Gzip.compress(payload, level: level, into: &body, keeping: workspace)) != nil else { return nil }
        return (body, clamped)
    }
}
