import APIHealth
import APIHealthSummary
import Foundation
import LineProtocol

/// Writes lines to standard output in the chosen format, through one buffer.
struct LinePrinter {
    let format: InfluxTail.Format
    let precision: Precision
    let colors: Bool
    private var buffer: [UInt8] = []

    init(format: InfluxTail.Format, precision: Precision, colors: Bool) {
        self.format = format
        self.precision = precision
        self.colors = colors
        buffer.reserveCapacity(1 << 20)
    }

    private mutating func write(_ text: String) {
        buffer += Array(text.utf8)
        if buffer.count > 1 << 20 { flush() }
    }

    mutating func flush() {
        guard !buffer.isEmpty else { return }
        Terminal.write(bytes: buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    private func paint(_ text: String, _ style: Terminal.Style) -> String {
        Terminal.paint(text, style, colors: colors)
    }

    mutating func printLines(_ lines: [[UInt8]]) {
        switch format {
        case .line:
            for line in lines {
                Self.appendVisible(line, to: &buffer)
                buffer.append(UInt8(ascii: "\n"))
                if buffer.count > 1 << 20 { flush() }
            }
        case .json:
            for line in lines {
                guard let point = try? LineParser(precision: precision).parseLine(line) else { continue }
                write(Self.json(point, precision: precision) + "\n")
            }
        case .table:
            // By timestamp (requests are recorded when they complete but stamped when they start);
            // lines without a timestamp keep their place at the end, in send order.
            let points = lines.compactMap { try? LineParser(precision: precision).parseLine($0) }.enumerated()
                .sorted { a, b in
                    switch (a.element.timestamp, b.element.timestamp) {
                    case let (x?, y?): return x != y ? x < y : a.offset < b.offset
                    case (.some, nil): return true
                    case (nil, .some): return false
                    case (nil, nil): return a.offset < b.offset
                    }
                }
                .map(\.element)
            let rows = points.map { point in
                [
                    Self.time(point.timestamp), Terminal.visible(point.measurement), Self.tagText(point),
                    Self.fieldText(point),
                ]
            }
            var widths = [24, 10, 10]
            for row in rows {
                for column in 0..<3 { widths[column] = max(widths[column], row[column].count) }
            }
            for row in rows {
                let cells = (0..<3).map { row[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                write(
                    paint(cells[0], .dim) + "  " + paint(cells[1], .boldCyan) + "  " + paint(cells[2], .yellow) + "  "
                        + row[3] + "\n"
                )
            }
        }
    }

    /// Appends `line` with every control byte (C0 and DEL) written as a visible `\xNN` and every C1
    /// control character as `\u{NN}`, so a spool line cannot drive the terminal.
    static func appendVisible(_ line: [UInt8], to buffer: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        var index = 0
        while index < line.count {
            let byte = line[index]
            if byte < 0x20 || byte == 0x7F {
                buffer += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            } else if byte == 0xC2 && index + 1 < line.count && (0x80...0x9F).contains(line[index + 1]) {
                let control = line[index + 1]
                buffer += Array("\\u{".utf8) + [hex[Int(control >> 4)], hex[Int(control & 0xF)], UInt8(ascii: "}")]
                index += 1
            } else {
                buffer.append(byte)
            }
            index += 1
        }
    }

    static func time(_ timestamp: Timestamp?) -> String {
        guard let timestamp else { return "(server time)" }
        let date = Date(timeIntervalSince1970: Double(timestamp.seconds) + Double(timestamp.nanoseconds) / 1e9)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func tagText(_ point: Point) -> String {
        point.tags.map { Terminal.visible("\($0.key)=\($0.value)") }.joined(separator: ",")
    }

    static func fieldText(_ point: Point) -> String {
        point.fields.map { field in
            let key = Terminal.visible(field.key)
            switch field.value {
            case .float(let value): return "\(key)=\(value)"
            case .int(let value): return "\(key)=\(value)i"
            case .uint(let value): return "\(key)=\(value)u"
            case .bool(let value): return "\(key)=\(value)"
            case .string(let value): return "\(key)=\(Terminal.visible(quoted(value)))"
            }
        }.joined(separator: " ")
    }

    /// The point as one JSON object (without its line end): `time`, `timestamp_ns`, `measurement`, `tags`,
    /// `fields` and each field's type in `types`.
    static func json(_ point: Point, precision: Precision) -> String {
        var fields = JSONObject()
        var types = JSONObject()
        for field in point.fields {
            switch field.value {
            case .float(let value):
                fields = fields.adding(field.key, JSONNumber(value))
                types = types.adding(field.key, "float")
            case .int(let value):
                fields = fields.adding(field.key, value)
                types = types.adding(field.key, "integer")
            case .uint(let value):
                fields = fields.adding(field.key, value)
                types = types.adding(field.key, "unsigned")
            case .bool(let value):
                fields = fields.adding(field.key, value)
                types = types.adding(field.key, "boolean")
            case .string(let value):
                fields = fields.adding(field.key, value)
                types = types.adding(field.key, "string")
            }
        }
        var tags = JSONObject()
        for tag in point.tags { tags = tags.adding(tag.key, tag.value) }
        let object = JSONObject()
            .adding("time", point.timestamp == nil ? nil : time(point.timestamp))
            .adding("timestamp_ns", point.timestamp.flatMap { $0.value(in: .ns) })
            .adding("measurement", point.measurement).adding("tags", tags).adding("fields", fields)
            .adding("types", types)
        return String(JSONLines.line(object).dropLast())
    }

    /// A string field as the line and table formats show it: quoted, its quotes, backslashes and controls escaped.
    static func quoted(_ text: String) -> String { SummaryTable.string(text) }

    mutating func printStats(_ stats: SpoolStats) {
        if format == .json {
            var hosts = JSONObject()
            for (host, count) in stats.perHost { hosts = hosts.adding(host, count) }
            var statuses = JSONObject()
            for (status, count) in stats.perStatus { statuses = statuses.adding(status, count) }
            write(
                JSONLines.line(
                    JSONObject().adding("pending_lines", stats.lines).adding("pending_bytes", stats.bytes)
                        .adding("segments", stats.segments)
                        .adding(
                            "oldest_pending_age_seconds",
                            JSONNumber(stats.oldestAge.map { ($0 * 1e3).rounded() / 1e3 })
                        )
                        .adding("per_host", hosts).adding("per_status", statuses)
                        .adding("rejected_batches", stats.rejectedBatches).adding("rejected_lines", stats.rejectedLines)
                )
            )
            return
        }
        write(paint("Pending", .bold) + "\n")
        write("  lines            \(stats.lines)\n")
        write("  bytes            \(stats.bytes)\n")
        write("  segments         \(stats.segments)\n")
        write("  oldest pending   \(stats.oldestAge.map { String(format: "%.1f s ago", $0) } ?? "-")\n")
        write(paint("Requests per host", .bold) + "\n")
        for (host, count) in stats.perHost.sorted(by: { $0.value > $1.value }) {
            write("  \(Terminal.visible(host).padding(toLength: 30, withPad: " ", startingAt: 0)) \(count)\n")
        }
        write(paint("Requests per status", .bold) + "\n")
        for (status, count) in stats.perStatus.sorted(by: { $0.key < $1.key }) {
            write("  \(Terminal.visible(status).padding(toLength: 30, withPad: " ", startingAt: 0)) \(count)\n")
        }
        write(paint("Rejected", .bold) + "\n")
        write("  batches          \(stats.rejectedBatches)\n")
        write("  lines            \(stats.rejectedLines)\n")
    }

    mutating func printRejected(_ batches: [SpoolReader.RejectedBatch], filter: LineFilter) {
        for batch in batches {
            let when = batch.rejectedAt.map { ISO8601DateFormatter().string(from: $0) } ?? "-"
            let reason = Terminal.visible(batch.reason.replacingOccurrences(of: "\n", with: " "))
            if format == .json {
                write(
                    JSONLines.line(
                        JSONObject().adding("batch", batch.name).adding("rejected_at", when).adding("reason", reason)
                            .adding("lines", batch.lines.count)
                    )
                )
                continue
            }
            write(
                paint("# \(Terminal.visible(batch.name)) rejected \(when), \(batch.lines.count) lines: \(reason)", .red)
                    + "\n"
            )
            printLines(batch.lines.filter { filter.matches($0) })
        }
    }
}

/// What `--stats` reports.
struct SpoolStats {
    var lines = 0
    var bytes = 0
    var segments = 0
    var oldestAge: Double?
    var perHost: [String: Int] = [:]
    var perStatus: [String: Int] = [:]
    var rejectedBatches = 0
    var rejectedLines = 0

    init(lines: [[UInt8]], segments: Int, rejected: [SpoolReader.RejectedBatch], precision: Precision) {
        self.lines = lines.count
        self.bytes = lines.reduce(0) { $0 + $1.count + 1 }
        self.segments = segments
        let parser = LineParser(precision: precision)
        var oldest: Timestamp?
        for line in lines {
            guard let point = try? parser.parseLine(line) else { continue }
            if let timestamp = point.timestamp, oldest.map({ timestamp < $0 }) ?? true { oldest = timestamp }
            guard point.measurement == PointSchema.Measurement.request else { continue }
            perHost[point.tag(PointSchema.Tag.host) ?? "?", default: 0] += 1
            perStatus[point.tag(PointSchema.Tag.status) ?? "?", default: 0] += 1
        }
        if let oldest {
            oldestAge = Date().timeIntervalSince1970 - (Double(oldest.seconds) + Double(oldest.nanoseconds) / 1e9)
        }
        rejectedBatches = rejected.count
        rejectedLines = rejected.reduce(0) { $0 + $1.lines.count }
    }
}
