import LineProtocol

/// Makes the request body of a batch: gzip at the configured level, of the lines as every destination
/// takes them. One body serves every destination; a destination that wants it plain or at a coarser
/// precision makes its own form from it (``Shipper``).
///
/// ```swift
/// let compressor = BatchCompressor(pending: pending, configuration: configuration)
/// let body = compressor.body(of: Array("m v=1i 1\n".utf8))
/// ```
struct BatchCompressor: Sendable {
    let pending: PendingBatches
    /// zlib level.
    let level: Int
    /// Whether unsigned values go out as integers (a v1 destination is among them).
    let writesUnsignedAsSigned: Bool

    /// A compressor for `configuration`'s destinations.
    ///
    /// - Parameters:
    ///   - pending: The batches, which count the values clamped on the way.
    ///   - configuration: The gzip level, and whether a v1 destination is among them.
    init(pending: PendingBatches, configuration: APIHealthConfiguration) {
        self.pending = pending
        self.level = configuration.gzipLevel
        self.writesUnsignedAsSigned = configuration.writesUnsignedAsSigned
    }

    /// Makes the bodies of the batches waiting behind the one being sent, so a backlog is held
    /// compressed (see ``PendingBatches/makeWaitingBodies(_:)``).
    func makeWaitingBodies() {
        pending.makeWaitingBodies(body(of:))
    }

    /// The request body of `lines`; `nil` if gzip failed.
    ///
    /// - Parameter lines: Line protocol.
    /// - Returns: The gzip body.
    func body(of lines: [UInt8]) -> [UInt8]? {
        var payload = lines
        if writesUnsignedAsSigned {
            // Lines kept from before (or recorded with no v1 destination) may carry unsigned values,
            // which InfluxDB 1.x refuses: they go out as integers, clamped values counted once.
            let rewrite = LineEncoder.rewritingUnsignedAsSigned(lines)
            if rewrite.rewrittenFields > 0 { payload = rewrite.lines }
            if rewrite.clampedLines > 0 { pending.countRepaired(rewrite.clampedLines) }
        }
        return try? Gzip.compress(payload, level: level)
    }
}
