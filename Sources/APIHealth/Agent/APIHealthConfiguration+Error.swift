import Foundation
import LineProtocol

extension APIHealthConfiguration {
    /// What is wrong with a configuration; thrown at start, never silently ignored.
    ///
    /// ```swift
    /// do {
    ///     let agent = try APIHealthAgent(configuration: .fromEnvironment())
    /// } catch let error as APIHealthConfiguration.Error where error.code == .invalidValue {
    ///     print("fix \(error.setting ?? "a setting"): \(error)")
    /// }
    /// ```
    public struct Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        /// What kind of problem it is; new codes may be added.
        public struct Code: Sendable, Hashable, CustomStringConvertible {
            private let name: String
            private init(_ name: String) { self.name = name }
            public var description: String { name }

            /// Other `INFLUX_` settings are given, but no `INFLUX_URL`.
            public static let missingURL = Code("missingURL")
            /// A destination URL without a scheme and host.
            public static let relativeURL = Code("relativeURL")
            /// A destination URL that is neither http nor https.
            public static let unsupportedScheme = Code("unsupportedScheme")
            /// A precision other than `ns`, `us`, `ms` or `s`.
            public static let unknownPrecision = Code("unknownPrecision")
            /// A write API other than `v2`, `v1` or `v3`.
            public static let unknownWriteAPI = Code("unknownWriteAPI")
            /// A setting the chosen write API needs.
            public static let missingSetting = Code("missingSetting")
            /// A token file that cannot be read.
            public static let unreadableTokenFile = Code("unreadableTokenFile")
            /// A variable whose value cannot be used.
            public static let invalidValue = Code("invalidValue")
            /// A setting that cannot be used.
            public static let invalidSetting = Code("invalidSetting")
        }

        /// What kind of problem it is.
        public var code: Code
        /// What it concerns, where there is one thing: the setting's or environment variable's name
        /// (``Code/missingSetting``, ``Code/invalidValue``, ``Code/invalidSetting``), the URL
        /// (``Code/relativeURL``, ``Code/unsupportedScheme``), the token file's path, or the value refused
        /// (``Code/unknownPrecision``, ``Code/unknownWriteAPI``).
        public var setting: String?
        /// The value refused, for ``Code/invalidValue``.
        public var value: String?
        /// What went wrong, for people.
        public var reason: String

        /// An error of `code` about `setting`, explained by `reason`.
        ///
        /// - Parameters:
        ///   - code: What kind of problem it is.
        ///   - setting: What it concerns, if one thing.
        ///   - value: The value refused, if any.
        ///   - reason: What went wrong, for people.
        public init(code: Code, setting: String? = nil, value: String? = nil, reason: String) {
            self.code = code
            self.setting = setting
            self.value = value
            self.reason = reason
        }

        public var description: String { reason }

        /// Other `INFLUX_` settings are given, but no `INFLUX_URL`.
        public static var missingURL: Error {
            Error(code: .missingURL, reason: "INFLUX_URL is required when other INFLUX_ settings are given")
        }

        /// A destination URL without a scheme and host.
        ///
        /// - Parameter url: The URL as given.
        /// - Returns: The error.
        public static func relativeURL(_ url: String) -> Error {
            Error(
                code: .relativeURL,
                setting: url,
                reason: "the InfluxDB URL \"\(url)\" must be absolute (http://host:port)"
            )
        }

        /// A destination URL that is neither http nor https.
        ///
        /// - Parameter url: The URL as given.
        /// - Returns: The error.
        public static func unsupportedScheme(_ url: String) -> Error {
            Error(code: .unsupportedScheme, setting: url, reason: "the InfluxDB URL \"\(url)\" must use http or https")
        }

        /// A precision other than `ns`, `us`, `ms` or `s`.
        ///
        /// - Parameter value: The precision as given.
        /// - Returns: The error.
        public static func unknownPrecision(_ value: String) -> Error {
            Error(
                code: .unknownPrecision,
                setting: value,
                reason: "unknown precision \"\(value)\": use ns, us, ms or s"
            )
        }

        /// A write API other than `v2`, `v1` or `v3`.
        ///
        /// - Parameter value: The write API as given.
        /// - Returns: The error.
        public static func unknownWriteAPI(_ value: String) -> Error {
            Error(code: .unknownWriteAPI, setting: value, reason: "unknown write API \"\(value)\": use v2, v1 or v3")
        }

        /// A setting the chosen write API needs.
        ///
        /// - Parameter name: The environment variable's name.
        /// - Returns: The error.
        public static func missingSetting(_ name: String) -> Error {
            Error(code: .missingSetting, setting: name, reason: "\(name) is required")
        }

        /// A token file that cannot be read.
        ///
        /// - Parameter path: The file's path.
        /// - Returns: The error.
        public static func unreadableTokenFile(_ path: String) -> Error {
            Error(code: .unreadableTokenFile, setting: path, reason: "the token file \(path) cannot be read")
        }

        /// A variable whose value cannot be used.
        ///
        /// - Parameters:
        ///   - name: The variable's or setting's name.
        ///   - value: The value refused.
        /// - Returns: The error.
        public static func invalidValue(name: String, value: String) -> Error {
            Error(code: .invalidValue, setting: name, value: value, reason: "\(name) has an invalid value \"\(value)\"")
        }

        /// A setting that cannot be used, and why.
        ///
        /// - Parameters:
        ///   - name: The setting's name.
        ///   - reason: Why it cannot be used.
        /// - Returns: The error.
        public static func invalidSetting(name: String, reason: String) -> Error {
            Error(code: .invalidSetting, setting: name, reason: "\(name): \(reason)")
        }
    }
}
