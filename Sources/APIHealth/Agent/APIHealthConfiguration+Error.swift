import Foundation
import LineProtocol

extension APIHealthConfiguration {
    /// What is wrong with a configuration; thrown at start, never silently ignored.
    public enum Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        /// Other `INFLUX_` settings are given, but no `INFLUX_URL`.
        case missingURL
        /// A destination URL without a scheme and host.
        case relativeURL(String)
        /// A destination URL that is neither http nor https.
        case unsupportedScheme(String)
        /// A precision other than `ns`, `us`, `ms` or `s`.
        case unknownPrecision(String)
        /// A write API other than `v2`, `v1` or `v3`.
        case unknownWriteAPI(String)
        /// A setting the chosen write API needs (the environment variable's name).
        case missingSetting(String)
        /// A token file that cannot be read (its path).
        case unreadableTokenFile(String)
        /// A variable whose value cannot be used.
        case invalidValue(name: String, value: String)
        /// A setting that cannot be used, and why.
        case invalidSetting(name: String, reason: String)

        public var description: String {
            switch self {
            case .missingURL: return "INFLUX_URL is required when other INFLUX_ settings are given"
            case .relativeURL(let url): return "the InfluxDB URL \"\(url)\" must be absolute (http://host:port)"
            case .unsupportedScheme(let url): return "the InfluxDB URL \"\(url)\" must use http or https"
            case .unknownPrecision(let value): return "unknown precision \"\(value)\": use ns, us, ms or s"
            case .unknownWriteAPI(let value): return "unknown write API \"\(value)\": use v2, v1 or v3"
            case .missingSetting(let name): return "\(name) is required"
            case .unreadableTokenFile(let path): return "the token file \(path) cannot be read"
            case .invalidValue(let name, let value): return "\(name) has an invalid value \"\(value)\""
            case .invalidSetting(let name, let reason): return "\(name): \(reason)"
            }
        }
    }
}
