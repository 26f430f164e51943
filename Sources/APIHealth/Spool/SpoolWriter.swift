/// Does one round of the spool worker's file work: appends what was recorded since the last round to
/// each batch's file, seals the files of sealed batches, then removes the files of batches that are
/// gone. What it achieved goes back to the batching state as ``BatchingEvent/spoolRoundFinished(_:)``.
///
/// ```swift
/// let progress = SpoolWriter.write(work, to: spool)
/// ```
enum SpoolWriter {
    /// Writes `work` to `spool`.
    ///
    /// - Parameters:
    ///   - work: The appends, seals and removals of the round.
    ///   - spool: The spool directory.
    /// - Returns: Where each file's bytes end now, which are sealed, and the failures.
    static func write(_ work: SpoolWork, to spool: SpoolDirectory) -> SpoolProgress {
        var progress = SpoolProgress()
        for item in work.appends {
            do throws(SpoolError) {
                if !item.bytes.isEmpty {
                    do throws(SpoolError) {
                        try spool.append(item.bytes[...], to: item.segment)
                    } catch {
                        // Nothing of the chunk stays on disk: the next round starts where the file ends.
                        progress.written.append((item.segment, spool.committedLength(of: item.segment), false))
                        throw error
                    }
                    progress.written.append((item.segment, item.end, false))
                }
                if item.seals {
                    try spool.seal(item.segment)
                    progress.written.append((item.segment, item.end, true))
                }
            } catch {
                progress.failures.append(error)
            }
        }
        for segment in work.removals { spool.remove(segment) }
        return progress
    }
}
