import APIHealthSummary
import Foundation
import LineProtocol
import Testing

@Suite struct SummaryAggregatorTests {
    func line(_ path: String, _ milliseconds: Double, status: Int = 200, at seconds: Int64 = 1_700_000_000) -> [UInt8] {
        Array(
            "apihealth_request,host=h,method=GET,path=\(path),status=\(status) duration_ms=\(milliseconds),errors=\(status >= 400 ? 1 : 0)i \(seconds)000000000"
                .utf8
        )
    }

    @Test func pastTheExactLimitAnEndpointUsesTheSketchAndSaysSo() {
        var summary = SummaryAggregator()
        let count = SummaryAggregator.exactLimit * 2
        for index in 1...count { summary.add(line("/big", Double(index))) }
        summary.add(line("/small", 3))
        let rows = summary.rows()
        let big = rows.first { $0.path == "/big" }
        #expect(big?.percentilesExact == false)
        #expect(big?.requests == count)
        for (estimate, exact) in [(big?.p50, 10_000.0), (big?.p95, 19_000), (big?.p99, 19_800)] {
            #expect(abs((estimate ?? 0) - exact) / exact <= 0.01, "\(String(describing: estimate)) vs \(exact)")
        }
        #expect(rows.first { $0.path == "/small" }?.percentilesExact == true)
    }

    @Test func linesBeforeTheStartAreCountedApartAndStatusesDecideErrorsWithoutTheField() {
        var summary = SummaryAggregator(since: 1_700_000_100_000_000_000)
        summary.add(line("/a", 1, at: 1_700_000_000))
        summary.add(
            Array("apihealth_request,host=h,method=GET,path=/a,status=503 duration_ms=2.5 1700000200000000000".utf8)
        )
        summary.add(
            Array("apihealth_request,host=h,method=GET,path=/a,status=error duration_ms=9i 1700000201000000000".utf8)
        )
        summary.add(
            Array("apihealth_request,host=h,method=GET,path=/a,status=200 duration_ms=1 1700000199000000000".utf8)
        )
        let row = summary.rows().first
        #expect(summary.counts.earlier == 1)
        #expect(row?.requests == 3)
        #expect(row?.errors == 2, "503 and a transport error, read from the status tag")
        #expect(row?.lastStatus == "error", "the latest timestamp, not the last line")
        #expect(row?.p50 == 2.5)
    }
}
