import Foundation
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The correlation id: the first configured header, in the configured order, on the request, else on the
/// response, whatever the case of the header's name.
@Suite struct CorrelationIDTests {
    static let headers = ["X-Request-Id", "X-Correlation-Id", "traceparent"]

    @Test func theFirstConfiguredHeaderWinsWhateverItsCase() {
        var request = URLRequest(url: URL(string: "https://api.example.com/a")!)
        request.setValue("corr-1", forHTTPHeaderField: "x-correlation-id")
        request.setValue("req-1", forHTTPHeaderField: "X-REQUEST-ID")
        #expect(CorrelationID.find(in: request, response: nil, headers: Self.headers) == "req-1")
    }

    @Test func theResponseIsReadWhenTheRequestHasNone() {
        let request = URLRequest(url: URL(string: "https://api.example.com/a")!)
        let response = HTTPURLResponse(
            url: request.url!,
            statusCode: 200,
            httpVersion: "HTTP/1.1",
            headerFields: [
                "Content-Type": "text/plain",
                "TraceParent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "X-Correlation-Id": "",
            ]
        )
        #expect(
            CorrelationID.find(in: request, response: response, headers: Self.headers)
                == "4bf92f3577b34da6a3ce929d0e0e4736",
            "a traceparent gives its trace id; an empty header is none"
        )
        #expect(CorrelationID.find(in: request, response: nil, headers: Self.headers) == nil)
    }

    @Test func namesCompareIgnoringOnlyTheCaseOfASCIILetters() {
        #expect(CorrelationID.equalIgnoringASCIICase("X-Request-Id", "x-request-ID"))
        #expect(!CorrelationID.equalIgnoringASCIICase("X-Request-Id", "X-Request-I"))
        #expect(!CorrelationID.equalIgnoringASCIICase("X-Request_Id", "X-Request-Id"))
        #expect(!CorrelationID.equalIgnoringASCIICase("É", "é"))
    }
}
