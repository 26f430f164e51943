extension APIHealthAgent {
    /// Why ``APIHealthAgent/run()`` refused to run.
    public struct LifecycleError: Swift.Error, Hashable, CustomStringConvertible {
        /// What kind of problem it is; new codes may be added.
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            private let name: String
            /// `run()` was called while it was running, or after it returned: an agent runs once.
            public static let alreadyRun = Code(name: "alreadyRun")
            public var description: String { name }
        }

        /// What kind of problem it is.
        public let code: Code
        public var description: String {
            switch code {
            case .alreadyRun: return "APIHealthAgent.run() was called a second time; an agent runs once"
            default: return "APIHealthAgent lifecycle error \(code)"
            }
        }
    }

    /// Ships until graceful shutdown (or task cancellation), then flushes what is pending within
}
