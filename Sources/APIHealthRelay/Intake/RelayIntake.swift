@_spi(Package) @_spi(Benchmarking) import APIHealth
import LineProtocol

/// The relay's intake: one write request in, one answer out. It authenticates the app key, bounds the
/// body, applies the client's and the key's rates, checks every line against the schema
/// (``LineCheck``) and the key's new series, and hands the lines that pass to the agent, which forwards
/// them with its batching, spool and retries. The answer is given once the lines are written through to
/// the agent's spool (when it has one), so a relay that dies after answering loses nothing it took.
///
/// ```swift
/// let intake = RelayIntake(configuration: configuration, agent: agent)
/// let answer = await intake.handle(IntakeRequest(authorization: "Token k3y", client: "203.0.113.9", body: body))
/// ```
///
/// Parsing and checking run on the caller's thread, without a lock; the limits and counters are one
/// value behind one lock, taken twice a request. A line is checked where it is, on its bytes
/// (``LineCheck/check(_:spans:precision:forwarding:now:into:)``), and forwarded as written but for what the
/// relay changes; only a line with escapes or another form than the agent's goes through a `Point`.
package final class RelayIntake: Sendable {
    package let configuration: RelayConfiguration
    let check: LineCheck
    let agent: APIHealthAgent
    let clock: any AgentClock

    /// What the intake keeps between requests: the rates of clients and keys, the keys' series, the
    /// counters.
    struct State {
        var clients: ClientTable
        var keyBuckets: [LineBucket?]
        var series: [SeriesBudget]
        var counters = RelayCounters()
    }

    /// Guards the limits' state and the counters: a leaf, taken briefly, never around parsing or I/O.
    let state: Locked<State>

    package init(configuration: RelayConfiguration, agent: APIHealthAgent, clock: any AgentClock = SystemAgentClock()) {
        self.configuration = configuration
        self.check = configuration.check
        self.agent = agent
        self.clock = clock
        state = Locked(
            State(
                clients: ClientTable(capacity: configuration.clientTableSize),
                keyBuckets: Array(repeating: nil, count: configuration.keys.count),
                series: Array(
                    repeating: SeriesBudget(perHour: configuration.newSeriesPerHour),
                    count: configuration.keys.count
                )
            )
        )
    }

    /// The most memory the limits hold, whatever the number of clients: the client table and every key's
    /// series budget.
    package var limitBytes: Int {
        ClientTable.bytes(capacity: configuration.clientTableSize) + configuration.keys.count
            * SeriesBudget.bytes(perHour: configuration.newSeriesPerHour)
    }

    /// The counters so far.
    package var counters: RelayCounters { state.withLock { $0.counters } }

    /// Answers one write request, once the lines it took are written through to the agent's spool.
    package func handle(_ request: IntakeRequest) async -> IntakeAnswer {
        guard let key = request.key, let app = configuration.keys.app(forKey: key) else {
            count(.key, lines: 1)
            return .error(401, code: "unauthorized", message: "unknown or revoked app key")
        }
        guard request.body.count <= configuration.maximumBodyBytes else { return tooLarge() }
        var body = request.body
        if let encoding = request.contentEncoding?.lowercased(), encoding.contains("gzip") {
            let limit = configuration.maximumBodyBytes
            switch Result(catching: { () throws(Gzip.Failure) -> [UInt8] in
                try Gzip.decompress(request.body, limit: limit)
            }) {
            case .success(let inflated):
                body = inflated
            case .failure(let failure):
                if failure.operation.contains("over the limit") { return tooLarge() }
                count(.body, lines: 1)
                return .error(400, code: "invalid", message: "the body is not gzip: \(failure)")
            }
        }
        guard let precision = Self.precision(request.precision) else {
            count(.body, lines: 1)
            return .error(400, code: "invalid", message: "precision must be one of ns, us, ms, s")
        }
        let (answer, accepted) = body.withUnsafeBufferPointer { bytes in
            handle(lines: bytes, precision: precision, app: app, client: request.client)
        }
        if accepted > 0 { await agent.writeThrough() }
        return answer
    }

    private func handle(
        lines bytes: UnsafeBufferPointer<UInt8>,
        precision: Precision,
        app: AppKeys.App,
        client: String
    ) -> (answer: IntakeAnswer, accepted: Int) {
        var ranges: [(number: Int, range: Range<Int>)] = []
        for line in LineSplitter(bytes) where Self.holdsPoint(bytes, line.range) {
            ranges.append((line.number, line.range))
        }
        let now = clock.now
        if let wait = admit(lines: ranges.count, app: app, client: client, now: now) {
            let seconds = max(1, (wait + .milliseconds(999)).components.seconds)
            let throttled = IntakeAnswer.error(
                429,
                code: "too many requests",
                message: "over the lines per minute of this client or key; retry after \(seconds) s",
                headers: ["Retry-After": "\(seconds)"]
            )
            return (throttled, 0)
        }
        let parser = LineParser(precision: precision)
        let wall = clock.wallNow
        let forwarding = LineCheck.Forwarding(
            app: app,
            precision: agent.configuration.precision,
            writesUnsignedAsSigned: agent.configuration.writesUnsignedAsSigned
        )
        // The lines taken, ready to forward: most as written, one after another in `forwarded` (checked on
        // their bytes), the few the careful path took as points.
        var forwarded: [UInt8] = []
        forwarded.reserveCapacity(bytes.count + ranges.count * (forwarding.environmentTag.count + 24))
        var taken: [(line: TakenLine, series: UInt64, number: Int, range: Range<Int>)] = []
        taken.reserveCapacity(ranges.count)
        var refused: [RefusedLine] = []
        var spans = LineSpans()
        for (number, range) in ranges {
            let line = UnsafeBufferPointer(rebasing: bytes[range])
            do {
                guard try parser.scanLine(line, lineNumber: number, into: &spans) else { continue }
            } catch {
                refused.append(Self.refusedLine(number, .unparsable, detail: "\(error)", line))
                continue
            }
            let start = forwarded.count
            switch check.check(
                line,
                spans: spans,
                precision: precision,
                forwarding: forwarding,
                now: wall,
                into: &forwarded
            ) {
            case .forward(let series):
                taken.append((.bytes(start..<forwarded.count), series, number, range))
            case .refused(let reason):
                refused.append(Self.refusedLine(number, reason, detail: Self.detail(reason), line))
            case .careful:
                // Escapes, line breaks in strings, repeated fields, other number forms: as a point.
                do {
                    guard var point = try parser.parseLine(line, lineNumber: number) else { continue }
                    if let reason = check.check(&point, app: app, now: wall) {
                        refused.append(Self.refusedLine(number, reason, detail: Self.detail(reason), line))
                        continue
                    }
                    taken.append((.point(point), Self.seriesHash(point), number, range))
                } catch {
                    refused.append(Self.refusedLine(number, .unparsable, detail: "\(error)", line))
                }
            }
        }
        let admitted = state.withLock { state in
            taken.map { state.series[app.index].admit(series: $0.series, now: now) }
        }
        var accepted = 0
        forwarded.withUnsafeBufferPointer { forwarded in
            for (entry, isAdmitted) in zip(taken, admitted) {
                let line = UnsafeBufferPointer(rebasing: bytes[entry.range])
                guard isAdmitted else {
                    refused.append(
                        Self.refusedLine(entry.number, .seriesLimit, detail: Self.detail(.seriesLimit), line)
                    )
                    continue
                }
                let written: Bool
                switch entry.line {
                case .bytes(let range): written = agent.write(line: UnsafeBufferPointer(rebasing: forwarded[range]))
                case .point(let point): written = agent.write(point, keepingTimestamp: true)
                }
                if written {
                    accepted += 1
                } else {
                    refused.append(
                        Self.refusedLine(entry.number, .unparsable, detail: "cannot be written as line protocol", line)
                    )
                }
            }
        }
        refused.sort { $0.number < $1.number }
        state.withLock { state in
            state.counters.requests += 1
            state.counters.linesAccepted += UInt64(accepted)
            for line in refused { state.counters.refused[line.reason, default: 0] += 1 }
        }
        return (refused.isEmpty ? .taken : .partial(refused, of: ranges.count), accepted)
    }

    /// Whether `lines` of `client` with `app`'s key may go now (`nil`), or how long they must wait; when
    /// they may, they are taken from both buckets.
    private func admit(lines: Int, app: AppKeys.App, client: String, now: Duration) -> Duration? {
        var hasher = Hasher()
        hasher.combine(client)
        let clientHash = UInt64(bitPattern: Int64(hasher.finalize()))
        return state.withLock { state in
            let clientWait = state.clients.wait(
                client: clientHash,
                lines: lines,
                perMinute: configuration.clientLinesPerMinute,
                now: now
            )
            var keyBucket =
                state.keyBuckets[app.index] ?? LineBucket(perMinute: configuration.keyLinesPerMinute, now: now)
            let keyWait = keyBucket.wait(for: lines, perMinute: configuration.keyLinesPerMinute, now: now)
            if clientWait == nil && keyWait == nil {
                state.clients.take(client: clientHash, lines: lines)
                keyBucket.take(lines)
            }
            state.keyBuckets[app.index] = keyBucket
            guard let wait = [clientWait, keyWait].compactMap({ $0 }).max() else { return nil }
            state.counters.requests += 1
            state.counters.requestsThrottled += 1
            state.counters.refused[.throttled, default: 0] += UInt64(lines)
            return wait
        }
    }

    fileprivate func tooLarge() -> IntakeAnswer {
        count(.bodyTooLarge, lines: 1)
        return .error(
            413,
            code: "request too large",
            message: "the body is over \(configuration.maximumBodyBytes) bytes, as received or after gzip"
        )
    }

    private func count(_ reason: Refusal, lines: UInt64) {
        state.withLock { state in
            state.counters.requests += 1
            state.counters.refused[reason, default: 0] += lines
        }
    }

    /// The clients' table size and evictions, for the health point.
    package var clientTable: (count: Int, evicted: UInt64) {
        state.withLock { ($0.clients.count, $0.clients.evicted) }
    }

    // MARK: Lines

    /// A line taken: where it is in the request's forwarded bytes, or the point the careful path made.
    enum TakenLine {
        case bytes(Range<Int>)
        case point(Point)
    }

    /// Whether a line holds a point: not blank, not a comment.
    static func holdsPoint(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        guard
            let first = range.first(where: {
                bytes[$0] != UInt8(ascii: " ") && bytes[$0] != UInt8(ascii: "\t") && bytes[$0] != UInt8(ascii: "\r")
            })
        else { return false }
        return bytes[first] != UInt8(ascii: "#")
    }

    /// The series of a checked point: its measurement and tags, hashed as the byte check hashes a line's
    /// (`measurement,key=value,…` without escapes), so that a series is one whichever path its lines took.
    static func seriesHash(_ point: Point) -> UInt64 {
        var series = Array(point.measurement.utf8)
        for tag in point.tags {
            series.append(UInt8(ascii: ","))
            series += tag.key.utf8
            series.append(UInt8(ascii: "="))
            series += tag.value.utf8
        }
        var hasher = Hasher()
        series.withUnsafeBytes { hasher.combine(bytes: $0) }
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }

    static func refusedLine(
        _ number: Int,
        _ reason: Refusal,
        detail: String,
        _ line: UnsafeBufferPointer<UInt8>
    ) -> RefusedLine {
        RefusedLine(
            number: number,
            reason: reason,
            detail: detail,
            text: String(decoding: UnsafeBufferPointer(rebasing: line.prefix(200)), as: UTF8.self)
        )
    }

    static func detail(_ reason: Refusal) -> String {
        switch reason {
        case .measurement: return "not a measurement of the APIHealth schema"
        case .tag: return "a tag key the schema does not have for this measurement"
        case .tagValue:
            return "a tag value over \(LineCheck.maximumTagValueBytes) bytes, or over \(LineCheck.maximumTags) tags"
        case .service: return "no service tag, or another app's than the key's"
        case .place: return "the country tag is not an ISO 3166-1 alpha-2 code"
        case .version: return "the app_version tag is not a version"
        case .field: return "a field key the schema does not have for this measurement"
        case .fieldType: return "a field value of another type than the schema's"
        case .timestamp: return "the timestamp is outside the relay's window"
        case .seriesLimit: return "a new series past the key's new series for the hour"
        default: return reason.rawValue
        }
    }

    /// The `precision` parameter as a ``Precision``: `ns` when absent; 1.x's `n` and `u` too.
    static func precision(_ text: String?) -> Precision? {
        switch text {
        case nil, "", "ns", "n": return .ns
        case "us", "u": return .us
        case "ms": return .ms
        case "s": return .s
        default: return nil
        }
    }
}

extension RelayIntake {
    /// The answer to a body the HTTP server saw was over the limit before reading it all (its
    /// `Content-Length`, or the bytes so far), counted as the intake counts its own.
    package func refuseTooLarge() -> IntakeAnswer {
        tooLarge()
    }
}
