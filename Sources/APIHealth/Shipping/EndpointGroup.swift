import Foundation

/// A destination's failover group as a plain value: which URL is in use, and each URL's own backoff.
///
/// The agent starts at a random URL, stays on it while it answers, and moves to the next when it
/// fails; the destination waits only when every URL is backing off, until the first of them may be
/// tried again.
struct EndpointGroup {
    struct Endpoint {
        let url: URL
        /// Not tried again before this.
        var notBefore: Duration?
        /// Failures in a row (its backoff grows with them).
        var failures = 0
        /// The configuration error (401, 403, 404) already reported for it.
        var reportedStatus: Int?
    }

    private(set) var endpoints: [Endpoint]
    /// The URL in use.
    private(set) var current: Int

    /// The group of `urls` (not empty), starting at `start`.
    init(urls: [URL], start: Int) {
        endpoints = urls.map { Endpoint(url: $0) }
        current = urls.isEmpty ? 0 : start % urls.count
    }

    /// The URL to send to now.
    var currentURL: URL { endpoints[current].url }

    /// The URL in use answered: its backoff is over.
    mutating func succeeded() {
        endpoints[current].failures = 0
        endpoints[current].notBefore = nil
        endpoints[current].reportedStatus = nil
    }

    /// Failures in a row of the URL in use, this one included once ``failed(until:)`` has run.
    var currentFailures: Int { endpoints[current].failures }

    /// The URL in use failed and waits until `notBefore`: the group moves to the next URL that may be
    /// tried first. Returns when the destination may send again (`now` or later).
    mutating func failed(until notBefore: Duration, now: Duration) -> Duration {
        endpoints[current].failures += 1
        endpoints[current].notBefore = notBefore
        guard endpoints.count > 1 else { return notBefore }
        // The next URL in order that is free now; otherwise the one free soonest.
        for step in 1..<endpoints.count {
            let candidate = (current + step) % endpoints.count
            if (endpoints[candidate].notBefore ?? .zero) <= now {
                current = candidate
                return now
            }
        }
        var soonest = (current + 1) % endpoints.count
        for index in endpoints.indices
        where (endpoints[index].notBefore ?? .zero) < (endpoints[soonest].notBefore ?? .zero) {
            soonest = index
        }
        current = soonest
        return max(now, endpoints[soonest].notBefore ?? now)
    }

    /// Marks the configuration error `status` reported for the URL in use; `true` the first time.
    mutating func reportConfigurationError(_ status: Int) -> Bool {
        guard endpoints[current].reportedStatus != status else { return false }
        endpoints[current].reportedStatus = status
        return true
    }
}
