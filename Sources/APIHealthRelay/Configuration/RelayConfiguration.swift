import Foundation

/// What a relay takes and from whom: its keys, limits and the window its timestamps must fall in. Data only;
/// ``fromEnvironment(_:)`` reads it from the environment.
package struct RelayConfiguration: Sendable {
    /// The app keys installs authenticate with.
    package var keys: AppKeys
    /// The address the HTTP server binds.
    package var host = "0.0.0.0"
    /// The port the HTTP server binds.
    package var port = 8087
    /// The largest body taken, as received and after gzip: an agent's batch is 1 MiB of lines at most.
    package var maximumBodyBytes = 2 << 20
    /// Lines a minute one client address may send (a burst of a minute's worth).
    package var clientLinesPerMinute = 20_000
    /// Lines a minute one key may send, every client together.
    package var keyLinesPerMinute = 2_000_000
    /// Series a key may start in an hour (one not written in the current or the previous hour).
    package var newSeriesPerHour = 10_000
    /// Client addresses whose rate is kept at once.
    package var clientTableSize = 100_000
    /// The header a trusted load balancer names the client in; `nil`: the peer's address.
    package var clientHeader: String?
    /// The window timestamps must fall in, around the relay's clock.
    package var maximumAge: Duration = .seconds(86_400)
    /// How far ahead of the relay's clock a timestamp may be.
    package var maximumAhead: Duration = .seconds(600)
    /// Whether a line stamped outside the window is stamped with the relay's clock instead of refused.
    package var restamps = false
    /// Tag keys an install may write beside the schema's.
    package var extraTags: Set<String> = []
    /// How often the relay writes its own health point.
    package var healthInterval: Duration = .seconds(60)

    /// A configuration with `keys` and the defaults for the rest.
    package init(keys: AppKeys) {
        self.keys = keys
    }

    /// The schema check this configuration asks for.
    package var check: LineCheck {
        LineCheck(
            maximumAge: maximumAge,
            maximumAhead: maximumAhead,
            restamps: restamps,
            extraTags: extraTags
        )
    }
}
