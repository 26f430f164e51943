import Foundation
import Testing

/// Where the influxdb:2 image runs `*.sh` files once, after its first setup.
private let initFolder = "/docker-entrypoint-initdb.d"

/// Runs `arguments` (found on the PATH) in the repository's root with `input` on stdin; returns stdout.
private func run(_ arguments: [String], input: Data = Data(), environment: [String: String]? = nil) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.currentDirectoryURL = repositoryRoot
    if let environment { process.environment = environment }
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    stdin.fileHandleForWriting.write(input)
    try stdin.fileHandleForWriting.close()
    let output = stdout.fileHandleForReading.readDataToEndOfFile()
    let errors = stderr.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw StackError(
            "\(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(String(decoding: errors, as: UTF8.self))"
        )
    }
    return output
}

private struct StackError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// docker-compose.yml as docker-compose resolves it with the values of `.env.example` (the file the README
/// tells users to copy), whatever this process's environment or a developer's `.env` holds.
private func resolvedCompose() throws -> [String: Any] {
    var environment = ProcessInfo.processInfo.environment.filter {
        !$0.key.hasPrefix("DOCKER_INFLUXDB_") && !$0.key.hasPrefix("GRAFANA_") && !$0.key.hasPrefix("COMPOSE_")
    }
    environment["COMPOSE_PROJECT_NAME"] = "apihealth"
    let yaml = try run(
        ["docker-compose", "--env-file", ".env.example", "-f", "docker-compose.yml", "config"],
        environment: environment
    )
    let json = try run(
        ["python3", "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
        input: yaml
    )
    guard let compose = try JSONSerialization.jsonObject(with: json) as? [String: Any] else {
        throw StackError("docker-compose config printed no mapping")
    }
    return compose
}

/// The words of the first `influx apply` command in `script`, as the shell splits them (line continuations
/// joined, quotes removed; a `$VAR` or `${VAR}` kept as written).
private func influxApplyArguments(in script: String) -> [String]? {
    let joined = script.replacingOccurrences(of: "\\\n", with: " ")
    for line in joined.split(separator: "\n") {
        let words = shellWords(String(line))
        if words.starts(with: ["influx", "apply"]) { return Array(words.dropFirst(2)) }
    }
    return nil
}

private func shellWords(_ line: String) -> [String] {
    var words: [String] = []
    var word = ""
    var inWord = false
    var quote: Character?
    for character in line {
        if let open = quote {
            if character == open { quote = nil } else { word.append(character) }
        } else if character == "\"" || character == "'" {
            quote = character
            inWord = true
        } else if character == "#" && !inWord {
            break
        } else if character == " " || character == "\t" {
            if inWord { words.append(word) }
            word = ""
            inWord = false
        } else {
            word.append(character)
            inWord = true
        }
    }
    if inWord { words.append(word) }
    return words
}

/// What keeps `arguments` (of `influx apply`, run by the influxdb service's init script) from applying the
/// dashboard template to the organisation the stack sets up; empty when nothing does.
private func problems(applyArguments arguments: [String], influxdb: [String: Any], repository: URL) -> [String] {
    var found: [String] = []
    func value(_ flag: String, _ short: String? = nil) -> String? {
        for (index, word) in arguments.enumerated() {
            if word == flag || word == short, index + 1 < arguments.count { return arguments[index + 1] }
            if word.hasPrefix(flag + "=") { return String(word.dropFirst(flag.count + 1)) }
        }
        return nil
    }
    let environment = influxdb["environment"] as? [String: Any] ?? [:]
    let mounts: [(host: String, container: String)] = (influxdb["volumes"] as? [String] ?? []).compactMap {
        let parts = $0.split(separator: ":").map(String.init)
        return parts.count >= 2 ? (parts[0], parts[1]) : nil
    }

    if environment["DOCKER_INFLUXDB_INIT_MODE"] as? String != "setup" {
        found.append("DOCKER_INFLUXDB_INIT_MODE is not setup: the image runs \(initFolder) only when it sets up")
    }
    if let file = value("--file", "-f") {
        let mount = mounts.first { file.hasPrefix($0.container + "/") }
        if let mount {
            let host = URL(fileURLWithPath: mount.host).appendingPathComponent(
                String(file.dropFirst(mount.container.count + 1))
            )
            if let data = try? Data(contentsOf: host),
                let objects = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]
            {
                if !objects.allSatisfy({ ($0["apiVersion"] as? String)?.hasPrefix("influxdata.com/") == true }) {
                    found.append("\(host.path) is not an InfluxDB template")
                }
                if !objects.contains(where: { $0["kind"] as? String == "Dashboard" }) {
                    found.append("\(host.path) holds no dashboard")
                }
                let bucket = environment["DOCKER_INFLUXDB_INIT_BUCKET"] as? String
                let buckets = objects.filter {
                    $0["kind"] as? String == "Variable"
                        && ($0["metadata"] as? [String: Any])?["name"] as? String == "bucket"
                }.flatMap { (($0["spec"] as? [String: Any])?["values"] as? [String]) ?? [] }
                if let bucket, !buckets.isEmpty, !buckets.contains(bucket) {
                    found.append("the template's bucket variable \(buckets) does not hold the bucket set up, \(bucket)")
                }
            } else {
                found.append("--file \(file) is \(host.path) on the host, which is not a readable JSON template")
            }
            if !host.standardizedFileURL.path.hasPrefix(repository.standardizedFileURL.path + "/") {
                found.append("--file \(file) is mounted from outside the repository (\(mount.host))")
            }
        } else {
            found.append("--file \(file) is under no folder the influxdb service mounts")
        }
    } else {
        found.append("no --file")
    }
    if let organisation = value("--org", "-o") {
        let reference = organisation.trimmingCharacters(in: CharacterSet(charactersIn: "${}"))
        if organisation.hasPrefix("$") {
            if reference != "DOCKER_INFLUXDB_INIT_ORG" {
                found.append(
                    "--org \(organisation) is not the organisation the image sets up (DOCKER_INFLUXDB_INIT_ORG)"
                )
            }
            if (environment["DOCKER_INFLUXDB_INIT_ORG"] as? String)?.isEmpty ?? true {
                found.append("the influxdb service does not set DOCKER_INFLUXDB_INIT_ORG")
            }
        } else if organisation != environment["DOCKER_INFLUXDB_INIT_ORG"] as? String {
            found.append("--org \(organisation) is not DOCKER_INFLUXDB_INIT_ORG")
        }
    } else {
        found.append("no --org")
    }
    if value("--force") != "yes" {
        found.append("no --force yes: influx apply would wait for a confirmation no one gives")
    }
    if let token = value("--token", "-t"), !token.hasPrefix("$") {
        found.append("a token written into the script")
    }
    return found
}

@Suite struct LocalStackTests {
    @Test func theInitScriptAppliesTheMountedTemplateToTheOrganisationSetUp() throws {
        let compose = try resolvedCompose()
        let services = try #require(compose["services"] as? [String: Any])
        let influxdb = try #require(services["influxdb"] as? [String: Any])
        let mounts = (influxdb["volumes"] as? [String] ?? []).map { $0.split(separator: ":").map(String.init) }
        let initMount = try #require(
            mounts.first { $0.count >= 2 && $0[1] == initFolder },
            "the influxdb service mounts a folder at \(initFolder)"
        )
        let folder = URL(fileURLWithPath: initMount[0])
        let scripts = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sh") }
        #expect(!scripts.isEmpty, "\(folder.path) holds a *.sh script")

        var applies = 0
        for name in scripts {
            let path = folder.appendingPathComponent(name).path
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let permissions = try #require(
                try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            )
            #expect(permissions & 0o111 == 0o111, "\(name) is executable (run-parts runs only executable files)")
            #expect(text.hasPrefix("#!/bin/bash\n") || text.hasPrefix("#!/bin/sh\n"), "\(name) starts with a shebang")
            guard let arguments = influxApplyArguments(in: text) else { continue }
            applies += 1
            #expect(
                problems(applyArguments: arguments, influxdb: influxdb, repository: repositoryRoot) == [],
                "\(name)"
            )
        }
        #expect(applies == 1, "one init script runs influx apply")

        // The demo writes where the template's dashboard reads.
        let demo = try #require(services["demo"] as? [String: Any])
        let demoEnvironment = try #require(demo["environment"] as? [String: Any])
        let influxEnvironment = try #require(influxdb["environment"] as? [String: Any])
        #expect(demoEnvironment["INFLUX_ORG"] as? String == influxEnvironment["DOCKER_INFLUXDB_INIT_ORG"] as? String)
        #expect(
            demoEnvironment["INFLUX_BUCKET"] as? String == influxEnvironment["DOCKER_INFLUXDB_INIT_BUCKET"] as? String
        )
    }

    /// Each condition is sent once: Grafana loads one alert rule set for the stack's one InfluxDB (the Flux rules
    /// and the delivery policy, not the InfluxQL rules on the same bucket), and the InfluxDB template is applied
    /// without its notification endpoint and rules (its checks still show their statuses in InfluxDB's UI).
    @Test func theStackSendsEachConditionOnce() throws {
        let compose = try resolvedCompose()
        let services = try #require(compose["services"] as? [String: Any])
        let grafana = try #require(services["grafana"] as? [String: Any])
        let mounts = (grafana["volumes"] as? [String] ?? []).map { $0.split(separator: ":").map(String.init) }
        let alerting = mounts.filter { $0.count >= 2 && $0[1].hasPrefix("/etc/grafana/provisioning/alerting") }
        #expect(
            Set(alerting.map { URL(fileURLWithPath: $0[0]).lastPathComponent })
                == ["apihealth-flux.yml", "apihealth-delivery.yml"],
            "\(mounts)"
        )
        #expect(!mounts.contains { $0.count >= 2 && $0[1] == "/etc/grafana/provisioning" }, "not the whole folder")
        for mount in alerting { #expect(FileManager.default.fileExists(atPath: mount[0]), "\(mount[0])") }
        let script = try String(
            contentsOf: repositoryRoot.appendingPathComponent("compose/influxdb-init/apply-apihealth-template.sh"),
            encoding: .utf8
        )
        let arguments = try #require(influxApplyArguments(in: script))
        for kind in ["NotificationRuleHTTP", "NotificationEndpointHTTP"] {
            #expect(
                zip(arguments, arguments.dropFirst()).contains { $0 == "--filter" && $1 == "kind=\(kind)" },
                "\(arguments)"
            )
        }
    }

    @Test func theCheckFindsArgumentsThatWouldNotApplyTheTemplate() throws {
        let compose = try resolvedCompose()
        let services = try #require(compose["services"] as? [String: Any])
        let influxdb = try #require(services["influxdb"] as? [String: Any])
        let good = try #require(
            influxApplyArguments(
                in: """
                    # influx apply --file /nowhere.json
                    influx apply \\
                        --file '/templates/apihealth-template.json' \\
                        --org "${DOCKER_INFLUXDB_INIT_ORG}" --force yes
                    """
            )
        )
        #expect(
            good == [
                "--file", "/templates/apihealth-template.json", "--org", "${DOCKER_INFLUXDB_INIT_ORG}", "--force",
                "yes",
            ]
        )
        #expect(problems(applyArguments: good, influxdb: influxdb, repository: repositoryRoot) == [])

        func replacing(_ flag: String, with value: String) -> [String] {
            var arguments = good
            arguments[arguments.firstIndex(of: flag)! + 1] = value
            return arguments
        }
        let broken: [(String, [String])] = [
            ("a template not mounted", replacing("--file", with: "/templates/other.json")),
            ("a folder not mounted", replacing("--file", with: "/etc/apihealth-template.json")),
            ("another organisation", replacing("--org", with: "acme")),
            ("another variable", replacing("--org", with: "$INFLUX_ORG")),
            ("no confirmation", Array(good.prefix(4))),
            ("a token in the script", good + ["--token", "s3cr3t"]),
        ]
        for (what, arguments) in broken {
            #expect(
                problems(applyArguments: arguments, influxdb: influxdb, repository: repositoryRoot).count == 1,
                "\(what)"
            )
        }
    }
}
