/// The agent's own fixed intervals, named in one place.
enum AgentIntervals {
    /// The longest a retry waits once shutdown has begun, so what is pending goes out within the
    /// shutdown deadline instead of waiting out the backoff.
    static let drainingRetryDelay: Duration = .milliseconds(250)
}
