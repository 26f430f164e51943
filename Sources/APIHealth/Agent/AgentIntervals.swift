/// The agent's own fixed intervals, named in one place.
enum AgentIntervals {
    /// How often the spool worker writes recorded lines through to the spool (and encodes captured
    /// samples): what a `kill -9` can lose at most.
    static let writeThrough: Duration = .milliseconds(20)
    /// The longest a retry waits once shutdown has begun, so what is pending goes out within the
    /// shutdown deadline instead of waiting out the backoff.
    static let drainingRetryDelay: Duration = .milliseconds(250)
}
