/// The app keys a relay accepts: each names an app (the `service` tag its installs must write) and an
/// environment. A key is public (it ships in every install) and revocable (drop it from the list and
/// restart); it never grants anything but writing that app's points through the relay.
///
/// ```swift
/// let keys = try AppKeys(parsing: "k3y-ios=shop-ios:prod,k3y-beta=shop-ios:beta")
/// keys.app(forKey: "k3y-ios")  // AppKeys.App(name: "shop-ios", environment: "prod")
/// ```
package struct AppKeys: Sendable {
    /// What a key lets an install write as.
    package struct App: Sendable, Hashable {
        /// The `service` tag every point of the key must carry.
        package var name: String
        /// The environment, written as the `env` tag of every point of the key (none when empty).
        package var environment: String
        /// The key's index in the configuration: its per-key state is kept under it.
        package var index: Int
    }

    private var apps: [String: App]

    /// The keys of `text`: `key=app:environment` (or `key=app`) pairs separated by commas.
    ///
    /// - Throws: ``RelayConfigurationError`` for a pair without a key or an app, or a key given twice.
    package init(parsing text: String) throws(RelayConfigurationError) {
        apps = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty else {
                throw RelayConfigurationError(.keys, "\"\(pair)\" is not key=app:environment")
            }
            let names = parts[1].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard let name = names.first, !name.isEmpty else {
                throw RelayConfigurationError(.keys, "the key \(Self.redacted(parts[0])) names no app")
            }
            guard apps[parts[0]] == nil else {
                throw RelayConfigurationError(.keys, "the key \(Self.redacted(parts[0])) is given twice")
            }
            apps[parts[0]] = App(name: name, environment: names.count > 1 ? names[1] : "", index: apps.count)
        }
        guard !apps.isEmpty else { throw RelayConfigurationError(.keys, "holds no key") }
    }

    /// The app `key` writes as; `nil` for a key the relay does not know (or no longer knows).
    package func app(forKey key: Substring) -> App? { apps[String(key)] }

    /// How many keys there are.
    package var count: Int { apps.count }

    /// Every app, in key order.
    package var all: [App] { apps.values.sorted { $0.index < $1.index } }

    /// A key as logs show it: its first four characters.
    package static func redacted(_ key: String) -> String { String(key.prefix(4)) + "…" }
}
