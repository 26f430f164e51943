import LineProtocol

/// The record stage: a captured request through the capture filter, into its series (tags, templated
/// path: ``RequestSchema``), its endpoint's interval aggregate, and — when it is written raw — a line in
/// the open batch (``PendingBatches``). Captured requests wait in the ``RecordIntake`` and are
/// recorded by the ``RecordLoop``, the one thread that runs this stage on them.
///
/// ```swift
/// let recorder = RequestRecorder(schema: schema, pending: pending)
/// recorder.record(sample, request: SentRequest(), now: clock.coarseNow)
/// ```
final class RequestRecorder: Sendable {
    let schema: RequestSchema
    let pending: PendingBatches
    /// Requests waiting to be recorded by the loop.
    let intake = RecordIntake()
    /// Corrects the device's clock, when the agent does: captured requests are stamped in corrected
    /// time, and their `Date` headers are its readings until a destination has answered.
    let clockCorrection: ClockCorrection?
    /// The agent's clock: its wall time is the device's.
    let clock: any AgentClock
    /// Judges each captured response a cache may store against the previous one of its URL, when the
    /// agent gives cache advice. Used only by the record loop.
    let cacheAdvisor: CacheAdvisor?

    init(
        schema: RequestSchema,
        pending: PendingBatches,
        clockCorrection: ClockCorrection? = nil,
        clock: any AgentClock = SystemAgentClock(),
        cacheAdvisor: CacheAdvisor? = nil
    ) {
        self.schema = schema
        self.pending = pending
        self.clockCorrection = clockCorrection
        self.clock = clock
        self.cacheAdvisor = cacheAdvisor
        // The tags a country kept by an earlier launch makes, before the loop learns any.
        if let learner = schema.countryLearner { pending.publishCountry(learner.published) }
        intake.startsLoop { [weak self] intake in
            guard let self else { return }
            RecordLoop.start(intake: intake, recorder: self)
        }
    }

    deinit {
        intake.close()
    }

    /// Passes `sample` of `request` through the capture filter, and records what it keeps (a sample it
    /// drops is counted, and is no loss: returns `true`).
    @discardableResult
    @inline(__always)
    func record(
        _ sample: borrowing RequestSample,
        request: @autoclosure () -> SentRequest,
        now: Duration,
        cache: JudgedResponse? = nil
    ) -> Bool {
        guard let filter = schema.filter else { return encode(sample, now: now, cache: cache) }
        guard let kept = filter(sample, request()) else {
            pending.count(.counted(\.requestsFiltered))
            return true
        }
        return encode(kept, now: now, cache: cache)
    }

    /// Counts `sample` in its endpoint's aggregate and, when it is written raw, records its line: the
    /// series is found and the request counted at once, the line encoded, and its bytes copied into the
    /// open batch under the batches' lock.
    @inline(__always)
    private func encode(_ sample: borrowing RequestSample, now: Duration, cache: JudgedResponse?) -> Bool {
        let nanoseconds = RequestSchema.wholeNanoseconds(sample.duration) ?? .max
        // What counting needs of the sample, read first: the closure captures plain values, never the
        // sample itself (which it would copy, retaining every reference in it, on every request).
        let transportFailure = RequestSchema.transportFailure(sample)
        let (requestBytes, responseBytes) = (sample.requestBytes, sample.responseBytes)
        let found: (RequestSeries, EndpointInterval.Added?)?
        do {
            found = try schema.series(for: sample) { series in
                series.interval?.add(
                    nanoseconds: nanoseconds,
                    failure: transportFailure ?? (series.succeeds ? .none : .failed),
                    requestBytes: requestBytes,
                    responseBytes: responseBytes
                )
            }
        } catch {
            pending.count(.pointInvalid)
            return false
        }
        guard let (series, counted) = found else { return false }
        // With cache advice, the verdict on the response.
        if let cache, let interval = series.interval { interval.count(cache, nanoseconds: nanoseconds) }
        if var added = counted {
            if added == .evicted, let interval = series.interval {
                // The aggregate in its place, found in the aggregator's registry.
                added = interval.add(
                    duration: sample.duration,
                    failure: RequestSchema.failure(sample, series: series),
                    requestBytes: sample.requestBytes,
                    responseBytes: sample.responseBytes
                )
            }
            switch added {
            case .counted: break
            case .countedOnly:
                schema.aggregator?.countOnlyAggregated()
                return true
            case .closed, .evicted:
                pending.count(.pointDroppedAfterClose)
                return false
            }
        }
        return pending.record(series: series, timestamp: Timestamp(date: sample.startedAt), now: now) { fields in
            schema.writeFields(of: sample, series: series, to: &fields)
        }
    }

    /// Queues a request to be recorded (its sample built first, for a `.request` one) by the record loop,
    /// off the caller's path: within ``RecordIntake/roundInterval``, and before every reader that must see
    /// every sample (pending lines, sealing before a send, flushing, shutdown) goes on. `now` is when the
    /// request ended, for batching. Once intake has closed, the sample is dropped (and counted) at once:
    /// returns `false`.
    @discardableResult
    func recordLater(now: Duration, _ source: DeferredSample.Source) -> Bool {
        guard intake.enqueue(DeferredSample(now: now, source: source)) else {
            pending.count(.pointDroppedAfterClose)
            return false
        }
        return true
    }

    /// Returns once the record loop has recorded every request queued before the call (at once from the
    /// loop's own thread: see ``RecordIntake/catchUp()``).
    func catchUp() {
        intake.catchUp()
    }

    /// Queues a sample given whole (``APIHealthAgent/record(_:)``), like ``recordLater(now:_:)``.
    @discardableResult
    func recordLater(now: Duration, recorded sample: consuming RequestSample) -> Bool {
        guard intake.enqueue(recorded: sample, now: now) else {
            pending.count(.pointDroppedAfterClose)
            return false
        }
        return true
    }

    /// Records one round the loop took from the intake, in the order the requests came. Only the record
    /// loop calls it (and tests, on a recorder whose loop has not started).
    func record(round: inout IntakeRound) {
        record(round.requests, samples: round.samples)
        publishCounts()
    }

    /// What the learners and the aggregates counted, published with the batches' counters, which
    /// readers see (``APIHealthAgent/metrics``, the health point).
    func publishCounts() {
        let overflowed = schema.takePathsOverflowed()
        if overflowed > 0 { pending.count(.pathsOverflowed(overflowed)) }
        if let aggregator = schema.aggregator { pending.count(.aggregates(aggregator.counts)) }
    }

    /// Queues the end of an aggregation interval and returns once the loop has taken its points
    /// (``IntervalEnd/points``), after every request queued before it; `false`, with nothing taken, once
    /// intake has closed (the last interval points are taken as it closes).
    func endInterval(_ end: IntervalEnd, now: Duration) -> Bool {
        guard intake.enqueue(DeferredSample(now: now, source: .intervalEnd(end))) else { return false }
        intake.catchUp()
        return true
    }

    /// `samples` are read from the round as their turn comes, and the round destroys them after (taking
    /// each out of an optional first moved its few hundred bytes four times: about 80 instructions more).
    private func record(_ requests: [DeferredSample], samples: [RequestSample]) {
        samples.withUnsafeBufferPointer { samples in record(requests, samples: samples) }
    }

    private func record(_ requests: [DeferredSample], samples: UnsafeBufferPointer<RequestSample>) {
        let correlationHeaders = schema.correlationHeaders
        let countryHeader = schema.countryLearner?.header
        var restamping = clockCorrection.map { Restamping(correction: $0, clock: clock) }
        var nextSample = 0
        for deferred in requests {
            switch deferred.source {
            case .parseFailure(let report):
                recordParseFailure(report, now: deferred.now)
            case .intervalEnd(let end):
                end.points = recordIntervalPoints(at: end.stamp, now: deferred.now)
            case .countryHeader(let value):
                observeCountry(value)
            case .recorded:
                let index = nextSample
                nextSample += 1
                if restamping == nil {
                    // A sample given whole, on the device's own clock: recorded as it is (through
                    // `record(captured:)`, which makes a local of its own to restamp, it costs about 670
                    // instructions more).
                    record(samples[index], request: SentRequest(), now: deferred.now)
                } else {
                    record(captured: samples[index], of: deferred, restamping: &restamping)
                }
            case .sample, .request:
                if let countryHeader, let value = deferred.responseHeader(countryHeader) {
                    observeCountry(value)
                }
                if let sample = deferred.sample(correlationHeaders: correlationHeaders) {
                    record(captured: sample, of: deferred, restamping: &restamping)
                }
            }
        }
    }

    /// Records the sample of a captured request (or one given whole, when the agent corrects the clock):
    /// its GraphQL operation named, stamped in corrected time, judged by the cache advisor.
    @inline(__always)
    private func record(
        captured sample: consuming RequestSample,
        of deferred: DeferredSample,
        restamping: inout Restamping?
    ) {
        var sample = sample
        if let graphQL = schema.graphQL, sample.graphQLOperation == nil, let request = deferred.urlRequest,
            graphQL.matches(sample.urlText)
        {
            sample.setGraphQLOperation(GraphQLOperation.segment(of: request, url: sample.urlText))
        }
        restamping?.apply(to: &sample, of: deferred)
        if let cacheAdvisor, let judged = judge(deferred, sample: sample, advisor: cacheAdvisor) {
            record(sample, request: deferred.request, now: deferred.now, cache: judged)
        } else {
            record(sample, request: deferred.request, now: deferred.now)
        }
    }

    /// Takes the country header's `value` from a response and publishes what the learner then has
    /// new (tags, a value ignored) for the threads that read it.
    private func observeCountry(_ value: String) {
        guard schema.observeCountry(value), let learner = schema.countryLearner else { return }
        pending.publishCountry(learner.published)
    }

    /// Takes the interval points of every endpoint aggregate, stamped `stamp`, and records them; with
    /// `closing`, the last ones. The record loop calls it at an interval's end, and the thread that closes
    /// intake once the loop has ended.
    func recordIntervalPoints(at stamp: Timestamp, closing: Bool = false, now: Duration) -> [Point] {
        guard let aggregator = schema.aggregator else { return [] }
        let points = aggregator.takePoints(at: stamp, closing: closing)
        for point in points { pending.record(point, now: now) }
        return points
    }

    private func recordParseFailure(_ report: ParseFailureReport, now: Duration) {
        let point = schema.parseFailurePoint(report)
        if let point { pending.record(point, now: now) }
    }

    /// The advisor's verdict on a captured response, with what its headers say; `nil` for a request
    /// that got no response (a transport failure) or a source that keeps none. A response a local cache
    /// served is counted as such and kept out of the comparison.
    private func judge(_ deferred: DeferredSample, sample: RequestSample, advisor: CacheAdvisor) -> JudgedResponse? {
        guard let statusCode = sample.statusCode, let evidence = deferred.cacheEvidence() else { return nil }
        if evidence.servedLocally {
            return JudgedResponse(verdict: CacheAdvisor.Verdict(), policy: evidence.policy, servedLocally: true)
        }
        let startedAt = Timestamp(date: sample.startedAt).nanosecondsSinceEpoch
        let verdict = advisor.judge(
            key: CacheAdvisor.Key(method: sample.method, url: sample.urlText, vary: evidence.policy.varyDigest),
            statusCode: statusCode,
            policy: evidence.policy,
            digest: evidence.digest,
            at: deferred.now,
            startedAt: startedAt,
            endedAt: startedAt &+ sample.duration.nanoseconds
        )
        if verdict.evicted { pending.count(.counted(\.cacheKeysEvicted)) }
        return JudgedResponse(verdict: verdict, policy: evidence.policy, servedLocally: false)
    }

    /// Moves captured samples, stamped on the system's clock, to the agent's corrected time; each
    /// network response's `Date` (plus `Age`) is a reading of the offset until a destination has answered.
    private struct Restamping {
        let correction: ClockCorrection
        /// The device's clock minus the system's, in nanoseconds: zero but in tests that give the agent a
        /// clock of its own.
        let deviceShift: Int64
        /// What moves a sample to corrected time: the device's shift and the offset.
        private(set) var shift: Int64
        /// Whether readings had agreed on an offset, as of the last sample.
        private(set) var knowsOffset: Bool
        let readsAPIDates: Bool

        init(correction: ClockCorrection, clock: any AgentClock) {
            self.correction = correction
            deviceShift = clock.wallNow.nanosecondsSinceEpoch &- Timestamp.systemNow().nanosecondsSinceEpoch
            let offset = correction.knownOffsetNanoseconds
            shift = deviceShift &+ (offset ?? 0)
            knowsOffset = offset != nil
            readsAPIDates = correction.wantsAPIReadings
        }

        /// Stamps `sample` in corrected time. While no offset is known it keeps the device's own clock (and
        /// the correction is asked again for each sample, so that one learned meanwhile, by a reading of this
        /// round or a destination's, stamps the samples after it); its line is moved to true time once one
        /// is, if it is still pending (``PendingBatches/offsetLearned(nanoseconds:)``).
        mutating func apply(to sample: inout RequestSample, of deferred: DeferredSample) {
            // A reading only from an answer that came over the network, from the API's server or a cache
            // on the way (which says how long it kept it in `Age`), not from a gateway's 5xx.
            if readsAPIDates, let status = sample.statusCode, status < 500, !deferred.servedLocally,
                let dateHeader = deferred.responseHeader("Date")
            {
                let sentAt = Timestamp(date: sample.startedAt).adding(nanoseconds: deviceShift)
                let untilHead = sample.timeToFirstByte ?? sample.duration
                correction.observe(
                    dateHeader: dateHeader,
                    age: deferred.responseHeader("Age"),
                    sentAt: sentAt,
                    receivedAt: sentAt.adding(nanoseconds: RequestSchema.wholeNanoseconds(untilHead) ?? .max / 2),
                    from: .api
                )
                // The reading may have settled the offset (or moved it): this sample is stamped with it already.
                lookAgain()
            } else if !knowsOffset {
                lookAgain()
            }
            if shift != 0 { sample.startedAt.addTimeInterval(Double(shift) / 1e9) }
        }

        private mutating func lookAgain() {
            let offset = correction.knownOffsetNanoseconds
            shift = deviceShift &+ (offset ?? 0)
            knowsOffset = offset != nil
        }
    }

    /// Closes intake: records the requests still waiting, runs `last` (which may still record: the last
    /// interval points), then seals what is open; later points are dropped and counted.
    func close(recordingLast last: () -> Void) {
        intake.closeAndCatchUp()
        last()
        pending.close()
    }
}
