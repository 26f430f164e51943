import Foundation
import Testing

@testable import APIHealth

@Suite struct RetryPolicyTests {
    @Test func delaysDoubleUpToTheCapWithBoundedJitter() {
        let policy = RetryPolicy()
        #expect(
            (1...7).map { policy.baseDelay(afterAttempt: $0) } == [5, 10, 20, 40, 80, 125, 125].map { .seconds($0) }
        )
        var random = SystemRandomNumberGenerator()
        for attempt in 1...10 {
            let delay = policy.delay(afterAttempt: attempt, using: &random)
            let base = policy.baseDelay(afterAttempt: attempt)
            #expect(delay >= base * 0.8 && delay <= base * 1.2)
        }
    }

    /// Every attempt count gives a delay no longer than the maximum, even where `multiplierⁿ` alone
    /// is past what a `Duration` holds (multiplier 3 passed it at attempt 42 and trapped).
    @Test func everyAttemptCountGivesADelayWithinTheMaximum() throws {
        func policy(_ initial: Duration, _ multiplier: Double, _ maximum: Duration, jitter: Double) -> RetryPolicy {
            var policy = RetryPolicy()
            policy.initialDelay = initial
            policy.multiplier = multiplier
            policy.maximumDelay = maximum
            policy.jitter = jitter
            return policy
        }
        let policies = [
            RetryPolicy(),
            policy(.seconds(10), 3, .seconds(600), jitter: 0.5),
            policy(.seconds(10), 10, .seconds(Int64.max / 2), jitter: 1),
            policy(.milliseconds(1), 1, .seconds(1), jitter: 0),
            policy(.seconds(1), 1.5, .seconds(1), jitter: 0.2),
            policy(.zero, 2, .zero, jitter: 0.2),
        ]
        var random = SystemRandomNumberGenerator()
        for policy in policies {
            try policy.validate()
            for attempt in 0...10_000 {
                let base = policy.baseDelay(afterAttempt: attempt)
                let delay = policy.delay(afterAttempt: attempt, using: &random)
                guard base <= policy.maximumDelay, base >= .zero, delay <= policy.maximumDelay, delay >= .zero,
                    base.secondsDouble.isFinite, delay.secondsDouble.isFinite
                else {
                    Issue.record("\(policy), attempt \(attempt): base \(base), delay \(delay)")
                    return
                }
            }
            if policy.multiplier > 1 && policy.initialDelay > .zero {
                #expect(policy.baseDelay(afterAttempt: 10_000) == policy.maximumDelay)
            }
        }
    }

    @Test func outOfRangeSettingsAreRefusedByValidation() {
        func refused(_ name: String, _ change: (inout RetryPolicy) -> Void) -> Bool {
            var configuration = APIHealthConfiguration(serviceName: "s")
            change(&configuration.retry)
            do {
                try configuration.validate()
                return false
            } catch {
                if error.code == .invalidValue { return error.setting == name }
                return false
            }
        }
        #expect(refused("retry.multiplier") { $0.multiplier = .infinity })
        #expect(refused("retry.multiplier") { $0.multiplier = .nan })
        #expect(refused("retry.multiplier") { $0.multiplier = 0.5 })
        #expect(refused("retry.jitter") { $0.jitter = -0.1 })
        #expect(refused("retry.jitter") { $0.jitter = 1.5 })
        #expect(refused("retry.jitter") { $0.jitter = .nan })
        #expect(refused("retry.initialDelay") { $0.initialDelay = .seconds(-1) })
        #expect(refused("retry.initialDelay") { $0.initialDelay = .seconds(200) })
        #expect(refused("retry.maximumDelay") { $0.maximumDelay = .seconds(-1) })
        #expect(refused("retry.maximumRetryDuration") { $0.maximumRetryDuration = .seconds(-1) })
        #expect(!refused("") { $0.jitter = 1 })
    }

    @Test func retryAfterReadsSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryPolicy.retryAfter("120", now: now) == .seconds(120))
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == .seconds(30))
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:40:00 GMT", now: now) == .zero)
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
    }
}
