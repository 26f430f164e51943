import Foundation

/// How many random cases a property test runs. The normal suite runs every test at its full size; a
/// sanitizer run (`scripts/test-sanitizers`), where each case costs several times as much, sets
/// `APIHEALTH_RANDOM_CASES_PERCENT` and runs that share of each, so every path is still taken thousands
/// of times. A test's floors on what its generator exercised scale with it.
///
/// ```swift
/// for index in 0..<RandomCases.count(30_000) { … }
/// #expect(direct > RandomCases.count(3_000))
/// ```
public enum RandomCases {
    /// The percentage of each test's cases this run takes: 100 unless the environment says less.
    public static let percent: Int = {
        guard let text = ProcessInfo.processInfo.environment["APIHEALTH_RANDOM_CASES_PERCENT"],
            let value = Int(text), (1...100).contains(value)
        else { return 100 }
        return value
    }()

    /// `full` scaled to this run's share, at least one.
    public static func count(_ full: Int) -> Int {
        max(1, full * percent / 100)
    }
}
