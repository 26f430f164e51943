/// A relay setting that cannot be used: which variable, and why.
package struct RelayConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The environment variable.
    package var variable: String
    /// What is wrong with its value.
    package var reason: String

    package init(_ variable: RelayEnvironmentVariable, _ reason: String) {
        self.init(variable: variable.rawValue, reason: reason)
    }

    /// An error of another variable the relay needs (the agent's `INFLUX_URL`).
    package init(variable: String, reason: String) {
        self.variable = variable
        self.reason = reason
    }

    package var description: String { "\(variable): \(reason)" }
}
