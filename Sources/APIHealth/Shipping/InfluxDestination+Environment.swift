import Foundation
import LineProtocol

extension InfluxDestination {
    /// The destinations the environment describes: `INFLUX_*`, then `INFLUX_2_*`, `INFLUX_3_*`, … for
    /// more destinations, each with the same settings.
    static func allFromEnvironment(
        _ environment: [String: String],
        notices: inout [String]
    ) throws(APIHealthConfiguration.Error) -> [InfluxDestination] {
        var destinations: [InfluxDestination] = []
        if let first = try fromEnvironment(environment, prefix: "INFLUX_", notices: &notices) {
            destinations.append(first)
        }
        var number = 2
        while let next = try fromEnvironment(environment, prefix: "INFLUX_\(number)_", notices: &notices) {
            destinations.append(next)
            number += 1
        }
        return destinations
    }

    static func fromEnvironment(
        _ environment: [String: String],
        prefix: String = "INFLUX_",
        notices: inout [String]
    ) throws(APIHealthConfiguration.Error) -> InfluxDestination? {
        func key(_ variable: EnvironmentVariable.Destination) -> String { prefix + variable.rawValue }
        let names = [
            key(.organization), key(.bucket), key(.token), key(.tokenFile), key(.database), key(.writeAPI),
        ]
        guard let urlText = environment[key(.url)], !urlText.isEmpty else {
            if names.contains(where: { environment[$0] != nil }) { throw .missingURL }
            return nil
        }
        var urls: [URL] = []
        for part in urlText.split(separator: ",") {
            let text = part.trimmingCharacters(in: .whitespaces)
            guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
                throw .relativeURL(redacted(text))
            }
            urls.append(url)
        }
        guard !urls.isEmpty else { throw .relativeURL(redacted(urlText)) }
        var token: InfluxToken?
        if let value = environment[key(.token)], !value.isEmpty {
            token = InfluxToken(value)
        } else if let path = environment[key(.tokenFile)] {
            guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw .unreadableTokenFile(path)
            }
            let value = contents.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !value.isEmpty else {
                throw .invalidSetting(name: key(.tokenFile), reason: "\(path) holds no token")
            }
            token = InfluxToken(value)
            if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                let mode = attributes[.posixPermissions] as? Int, mode & 0o004 != 0
            {
                notices.append(
                    "the token file \(path) can be read by other users (mode \(String(mode, radix: 8))); chmod o-r it"
                )
            }
        }
        let api: WriteAPI
        switch environment[key(.writeAPI)] ?? "v2" {
        case "v2":
            guard let org = environment[key(.organization)], !org.isEmpty else {
                throw .missingSetting(key(.organization))
            }
            guard let bucket = environment[key(.bucket)], !bucket.isEmpty else {
                throw .missingSetting(key(.bucket))
            }
            api = .v2(organization: org, bucket: bucket)
        case "v1":
            guard let database = environment[key(.database)], !database.isEmpty else {
                throw .missingSetting(key(.database))
            }
            api = .v1(database: database, retentionPolicy: environment[key(.retentionPolicy)])
        case "v3":
            guard let database = environment[key(.database)], !database.isEmpty else {
                throw .missingSetting(key(.database))
            }
            api = .v3(database: database)
        case let other:
            throw .unknownWriteAPI(other)
        }
        var destination = InfluxDestination(urls: urls, api: api, token: token)
        destination.name = environment[key(.name)]
        if prefix != "INFLUX_", let precision = environment[key(.precision)] {
            guard let value = Precision(rawValue: precision) else { throw .unknownPrecision(precision) }
            destination.precision = value
        }
        if let headers = environment[key(.headers)] {
            for pair in headers.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                guard parts.count == 2, !name.isEmpty else {
                    throw .invalidSetting(name: key(.headers), reason: "give Name=value pairs separated by commas")
                }
                destination.headers[name] = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        switch environment[key(.contentEncoding)] ?? "gzip" {
        case "gzip": destination.compression = .gzip
        case "identity": destination.compression = .identity
        case let other:
            throw .invalidSetting(name: key(.contentEncoding), reason: "\"\(other)\" is not gzip or identity")
        }
        try destination.validate()
        return destination
    }
}
