import Foundation
import Testing

@testable import APIHealth

@Suite struct WriteOutcomeTests {
    @Test func answersAreClassifiedAsTheWriteAPIDocuments() {
        #expect(WriteOutcome.classify(status: 204, headers: [:], body: Data()) == .delivered)
        #expect(WriteOutcome.classify(status: 413, headers: [:], body: Data()) == .tooLarge)
        #expect(
            WriteOutcome.classify(status: 429, headers: ["retry-after": "7"], body: Data())
                == .retry(reason: "HTTP 429 ", retryAfter: .seconds(7))
        )
        #expect(
            WriteOutcome.classify(status: 403, headers: [:], body: Data("no".utf8))
                == .misconfigured(status: 403, message: "no")
        )
        #expect(
            WriteOutcome.classify(status: 422, headers: [:], body: Data("partial write: x dropped=3".utf8))
                == .rejected(status: 422, message: "partial write: x dropped=3", dropped: 3)
        )
    }
}
