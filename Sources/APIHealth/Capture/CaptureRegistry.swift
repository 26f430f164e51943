import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the hook needs from the agent.
protocol SampleRecorder: AnyObject, Sendable {
    /// `false` once the agent is gone: its hook then passes every request through untouched.
    var isAlive: Bool { get }
    /// The agent behind it, while it is alive.
    var owner: AnyObject? { get }
    var isCapturing: Bool { get }
    /// Whether the agent gives cache advice: the hook then digests each response body as it streams.
    var digestsBodies: Bool { get }
    var correlationHeaders: [String] { get }
    func isExcluded(_ url: URL) -> Bool
    /// Hands `sample` of `request` to the agent, to be filtered and encoded off the request's path.
    func record(_ sample: RequestSample, request: URLRequest, cacheEvidence: CacheEvidence?)
    /// Hands an ended request to the agent, which builds its sample off the request's path.
    func recordEnded(_ request: any EndedRequestSource)
    /// Reads the country header of `response`, where the agent learns the country from one.
    func observeCountry(in response: HTTPURLResponse?)
    /// Counts a request the hook let through without recording it.
    func countUncaptured()
}

/// The instrumented configurations. URLSession takes protocol *classes*, not instances, so each
/// distinct (agent, module) gets a hook class of its own, made on demand and never reused: a
/// configuration instrumented by an agent that is gone keeps a class whose agent is gone, and its
/// requests pass through untouched instead of reaching whichever agent came next.
final class CaptureRegistry: Sendable {
    static let shared = CaptureRegistry()

    /// One instrumented (agent, module).
    struct Registration: Sendable {
        let module: String
        let recorder: any SampleRecorder
        /// The inner session that re-issues requests, where the platform has no native protocol to
        /// wrap (Apple platforms); `nil` on Linux.
        let innerSession: InnerSession?
    }

    private struct State {
        /// Registrations by the identity of their hook class.
        var byHook: [ObjectIdentifier: Registration] = [:]
        /// Hook classes by what distinguishes them, so instrumenting again reuses one.
        var hooks: [Key: InterceptingURLProtocol.Type] = [:]
        var classesMade = 0
    }

    private struct Key: Hashable {
        let recorder: ObjectIdentifier
        let module: String
    }

    /// Guards the registrations and the hook classes.
    private let state = Locked(State())

    /// The registration behind a hook class, if its agent is still alive.
    func registration(for hook: AnyClass) -> Registration? {
        let identity = ObjectIdentifier(hook)
        guard let registration = state.withLock({ $0.byHook[identity] }), registration.recorder.isAlive else {
            return nil
        }
        return registration
    }

    /// Returns the hook class for `module` of the agent behind `recorder`: the same class every time
    /// for the same agent and module. `configuration` is copied for the inner session where one is needed.
    func hook(
        for configuration: URLSessionConfiguration,
        module: String,
        recorder: any SampleRecorder,
        identity: AnyObject
    ) -> InterceptingURLProtocol.Type {
        let key = Key(recorder: ObjectIdentifier(identity), module: module)
        return state.withLock { state -> InterceptingURLProtocol.Type in
            if let existing = state.hooks[key], let registration = state.byHook[ObjectIdentifier(existing)],
                registration.recorder.owner === identity
            {
                return existing
            }
            let hook = HookClasses.make(state.classesMade)
            state.classesMade += 1
            let inner =
                InterceptingURLProtocol.wrapsNativeProtocol ? nil : InnerSession(copying: configuration, module: module)
            state.byHook[ObjectIdentifier(hook)] = Registration(module: module, recorder: recorder, innerSession: inner)
            state.hooks[key] = hook
            // Forget registrations whose agent is gone; their classes stay unique, so a stale
            // configuration finds nothing and passes its requests through.
            state.byHook = state.byHook.filter { $0.value.recorder.isAlive }
            state.hooks = state.hooks.filter { state.byHook[ObjectIdentifier($0.value)] != nil }
            return hook
        }
    }
}

/// Makes a distinct hook class for each number: a generic class instantiated over a chain of
/// bit types (binary digits of the number), so there is no fixed limit on instrumented configurations.
enum HookClasses {
    static func make(_ number: Int) -> InterceptingURLProtocol.Type {
        var bits: any HookBits.Type = NoBits.self
        var rest = number
        repeat {
            bits = rest & 1 == 0 ? prependZero(bits) : prependOne(bits)
            rest >>= 1
        } while rest > 0
        return hookClass(bits)
    }

    private static func prependZero<Rest: HookBits>(_: Rest.Type) -> any HookBits.Type { Bit0<Rest>.self }
    private static func prependOne<Rest: HookBits>(_: Rest.Type) -> any HookBits.Type { Bit1<Rest>.self }
    private static func hookClass<Bits: HookBits>(_: Bits.Type) -> InterceptingURLProtocol.Type { Hook<Bits>.self }
}

protocol HookBits {}
enum NoBits: HookBits {}
enum Bit0<Rest: HookBits>: HookBits {}
enum Bit1<Rest: HookBits>: HookBits {}

/// One instrumented (agent, module): its identity is its class.
final class Hook<Bits: HookBits>: InterceptingURLProtocol {}
