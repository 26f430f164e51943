@_spi(Package) import APIHealth
import Foundation

extension RelayConfiguration {
    /// Reads the relay's settings from ``RelayEnvironmentVariable``s; defaults for those not set.
    ///
    /// - Throws: ``RelayConfigurationError`` for a value that cannot be used, or when no key is given.
    package static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RelayConfigurationError) -> RelayConfiguration {
        typealias V = RelayEnvironmentVariable
        func value(_ variable: V) -> String? {
            guard let text = environment[variable.rawValue]?.trimmingCharacters(in: .whitespaces), !text.isEmpty
            else { return nil }
            return text
        }
        func count(_ variable: V, minimum: Int = 1) throws(RelayConfigurationError) -> Int? {
            guard let text = value(variable) else { return nil }
            guard let number = Int(text.replacingOccurrences(of: "_", with: "")), number >= minimum else {
                throw RelayConfigurationError(variable, "\"\(text)\" is not a whole number of at least \(minimum)")
            }
            return number
        }
        guard let keyText = value(.keys) else {
            throw RelayConfigurationError(.keys, "is not set: give key=app:env pairs")
        }
        var configuration = RelayConfiguration(keys: try AppKeys(parsing: keyText))
        if let host = value(.host) { configuration.host = host }
        if let port = try count(.port, minimum: 0) {
            guard port <= 65_535 else { throw RelayConfigurationError(.port, "\(port) is not a port") }
            configuration.port = port
        }
        if let bytes = try count(.maximumBodyBytes, minimum: 1_024) { configuration.maximumBodyBytes = bytes }
        if let lines = try count(.clientLinesPerMinute) { configuration.clientLinesPerMinute = lines }
        if let lines = try count(.keyLinesPerMinute) { configuration.keyLinesPerMinute = lines }
        if let series = try count(.newSeriesPerHour) { configuration.newSeriesPerHour = series }
        if let size = try count(.clientTableSize) { configuration.clientTableSize = size }
        if let header = value(.clientHeader) { configuration.clientHeader = header.lowercased() }
        if let seconds = try count(.maximumAge) { configuration.maximumAge = .seconds(seconds) }
        if let seconds = try count(.maximumAhead, minimum: 0) { configuration.maximumAhead = .seconds(seconds) }
        if let seconds = try count(.healthInterval) { configuration.healthInterval = .seconds(seconds) }
        if let text = value(.restamp) {
            // The agent's switch forms.
            guard let restamps = EnvironmentReader.switchValue(text) else {
                throw RelayConfigurationError(.restamp, "\"\(text)\" is not one of \(EnvironmentReader.switchForms)")
            }
            configuration.restamps = restamps
        }
        if let text = value(.extraTags) {
            configuration.extraTags = Set(
                text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            )
        }
        return configuration
    }
}
