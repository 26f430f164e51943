/// Every environment variable the relay reads beside the agent's own (`INFLUX_*` for the database,
/// `APIHEALTH_SPOOL_DIR`, …), named once: ``RelayConfiguration/fromEnvironment(_:)`` reads them by these
/// cases, and the article "A relay for app installs" documents each one (a test checks it).
package enum RelayEnvironmentVariable: String, CaseIterable, Sendable {
    /// App keys: `key=app:environment` pairs separated by commas.
    case keys = "APIHEALTH_RELAY_KEYS"
    /// The address the relay listens on.
    case host = "APIHEALTH_RELAY_HOST"
    /// The port the relay listens on.
    case port = "APIHEALTH_RELAY_PORT"
    /// The largest body taken, as received and after gzip.
    case maximumBodyBytes = "APIHEALTH_RELAY_MAX_BODY_BYTES"
    /// Lines a minute one client address may send.
    case clientLinesPerMinute = "APIHEALTH_RELAY_CLIENT_LINES_PER_MINUTE"
    /// Lines a minute one app key may send, all its clients together.
    case keyLinesPerMinute = "APIHEALTH_RELAY_KEY_LINES_PER_MINUTE"
    /// Series a key may start in an hour.
    case newSeriesPerHour = "APIHEALTH_RELAY_NEW_SERIES_PER_HOUR"
    /// Client addresses whose rate is kept at once; the least recently seen make room.
    case clientTableSize = "APIHEALTH_RELAY_CLIENTS"
    /// The header a trusted load balancer names the client in (its first address).
    case clientHeader = "APIHEALTH_RELAY_CLIENT_HEADER"
    /// How far in the past a timestamp may be, in seconds.
    case maximumAge = "APIHEALTH_RELAY_MAX_AGE_S"
    /// How far in the future a timestamp may be, in seconds.
    case maximumAhead = "APIHEALTH_RELAY_MAX_AHEAD_S"
    /// Whether a line stamped outside the window is stamped with the relay's clock instead of refused.
    case restamp = "APIHEALTH_RELAY_RESTAMP"
    /// Tag keys an install may write beside the schema's (its global tags).
    case extraTags = "APIHEALTH_RELAY_EXTRA_TAGS"
    /// How often the relay writes its own health point, in seconds.
    case healthInterval = "APIHEALTH_RELAY_HEALTH_INTERVAL_S"
}
