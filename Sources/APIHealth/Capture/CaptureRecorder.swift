import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The hook's view of an agent (weak, so a registered configuration does not keep the agent alive).
final class CaptureRecorder: SampleRecorder, @unchecked Sendable {
    private weak var agent: APIHealthAgent?
    /// Whether the agent's configuration captures requests at all (read once: the configuration is the agent's for
    /// its life).
    private let isEnabled: Bool
    let digestsBodies: Bool

    init(agent: APIHealthAgent) {
        self.agent = agent
        self.isEnabled = agent.configuration.isEnabled
        self.digestsBodies = agent.digestsBodies
    }

    var isAlive: Bool { agent != nil }
    var owner: AnyObject? { agent }
    func countUncaptured() { agent?.countUncaptured() }
    var isCapturing: Bool { isEnabled && agent != nil }
    var correlationHeaders: [String] { agent?.schema.correlationHeaders ?? [] }
    func isExcluded(_ url: URL) -> Bool { agent?.isExcluded(url) ?? true }
    func record(_ sample: RequestSample, request: URLRequest, cacheEvidence: CacheEvidence?) {
        agent?.recordLater(sample, request: request, cacheEvidence: cacheEvidence)
    }
    func recordEnded(_ request: any EndedRequestSource) { agent?.recordLater(request) }
    func observeCountry(in response: HTTPURLResponse?) {
        guard let response, let agent, let header = agent.schema.countryLearner?.header,
            let value = CorrelationID.find(in: response, headers: [header])
        else { return }
        agent.observeCountryHeader(value)
    }
}
