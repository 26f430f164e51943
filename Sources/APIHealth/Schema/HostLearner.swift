/// Folds what varies in a host name into a template, so the `host` tag is bounded whatever hosts a
/// service calls: `tenant4711.api.example.com` → `*.api.example.com`, `10.1.2.3` → `{ipv4}`.
///
/// - **IP literals** are written as themselves until `threshold` distinct ones of a family were seen;
///   from then on every one is `{ipv4}` or `{ipv6}` (the port, if any, stays: `{ipv4}:8080`), so a
///   service that calls one internal address by IP keeps it, and one that calls thousands gets one tag.
/// - **User rules** (``APIHealthConfiguration/CaptureOptions/hostRules``, as Sentry's `*.service.com`)
///   win over what is learned: a host a rule names is written as the rule.
/// - **Numbered and random labels** become `*` by their shape: a run of three or more digits
///   (`tenant123`, `db-0042`), four digits in all (`ip-10-0-1-2`), long hex, a UUID or an opaque token.
/// - **Learning.** Labels are read from the right, as a tree of the labels seen under each suffix.
///   When a position under one suffix passes `threshold` distinct labels (the same threshold as path
///   positions, ``APIHealthConfiguration/CaptureOptions/learningThreshold``), it becomes `*` for past
///   and future hosts alike, once and for good.
///
/// The last two labels (`example.com`) are never folded, so two third-party APIs stay two hosts. Memory
/// is bounded: at most `maximumNodes` labels are remembered; past that, a label not seen before at a
/// foldable position is written as `*`.
// `@unchecked Sendable`: the agent's record loop is the only thread that touches a learner (``RecordLoop``).
final class HostLearner: @unchecked Sendable {
    /// A label that varies.
    static let label = "*"
    static let ipv4 = "{ipv4}"
    static let ipv6 = "{ipv6}"

    private final class Node {
        var labels: [String: Node] = [:]
        /// Every label at the position below is `*`, and folds into `any`.
        var learned = false
        var any: Node?
    }

    private struct State {
        var root = Node()
        var nodes = 1
        /// The IP literals written as themselves, by family (`nil` once the family is learned).
        var ipv4: Set<String>? = []
        var ipv6: Set<String>? = []
    }

    private struct Rule: Sendable {
        let pattern: HostPattern
        /// The rule's text without a port, lowercased: what a host it names is written as.
        let template: String
    }

    private let threshold: Int
    private let maximumNodes: Int
    private let rules: [Rule]
    /// Invalidated when a position is learned (it holds series rendered with the templates before it).
    private let renderedSeries: RenderedSeries
    /// The tree of hosts learned.
    private var state = State()

    /// Runs `body` on the tree: one access at a time (the record loop's).
    @inline(__always)
    private func withState<Result>(_ body: (inout State) -> Result) -> Result { body(&state) }

    /// - Parameters:
    ///   - threshold: Distinct labels at one position under one suffix past which it becomes `*`.
    ///   - rules: Host patterns (`*.service.com`) written as themselves; invalid ones are left out
    ///     (``APIHealthConfiguration/validate()`` refuses them first).
    ///   - maximumNodes: Labels remembered at most.
    ///   - renderedSeries: Invalidated on every position learned.
    init(threshold: Int, rules: [String], maximumNodes: Int = 20_000, renderedSeries: RenderedSeries) {
        self.threshold = max(threshold, 1)
        self.maximumNodes = max(maximumNodes, 1)
        self.renderedSeries = renderedSeries
        self.rules = rules.compactMap { text in
            guard let pattern = HostPattern(text) else { return nil }
            return Rule(pattern: pattern, template: HostPattern.name(of: text))
        }
    }

    /// The host tag of `name` (lowercased, IPv6 without brackets) on `port`: the folded name, and
    /// `:port` when the URL names one.
    func tag(name: String, port: Int?) -> String {
        let folded = fold(name, port: port)
        return port.map { "\(folded):\($0)" } ?? folded
    }

    /// The template of `name`.
    func fold(_ name: String, port: Int? = nil) -> String {
        let isIPv6 = name.utf8.contains(UInt8(ascii: ":"))
        if isIPv6 || Self.isIPv4(name) {
            for rule in rules where rule.pattern.matches(host: name, port: port) { return rule.template }
            return withState { state in
                isIPv6
                    ? literal(name, in: &state.ipv6, else: Self.ipv6) : literal(name, in: &state.ipv4, else: Self.ipv4)
            }
        }
        for rule in rules where rule.pattern.matches(host: name, port: port) { return rule.template }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count > 2 else { return name }
        var folded = [Substring](repeating: "", count: labels.count)
        var changed = false
        withState { state in
            var node: Node? = state.root
            for (position, index) in labels.indices.reversed().enumerated() {
                let label = labels[index]
                folded[index] = label
                guard let current = node else {
                    // Below a label that is not remembered: fold what varies by its shape alone.
                    if position >= 2 && Self.varies(label) {
                        folded[index] = Substring(Self.label)
                        changed = true
                    }
                    continue
                }
                if position >= 2 && (current.learned || Self.varies(label)) {
                    folded[index] = Substring(Self.label)
                    changed = true
                    node = any(below: current, state: &state)
                    continue
                }
                let key = String(label)
                if let next = current.labels[key] {
                    node = next
                    continue
                }
                if position >= 2 && current.labels.count >= threshold {
                    learn(current, state: &state)
                    folded[index] = Substring(Self.label)
                    changed = true
                    node = current.any
                    continue
                }
                guard state.nodes < maximumNodes else {
                    if position >= 2 {
                        folded[index] = Substring(Self.label)
                        changed = true
                    }
                    node = nil
                    continue
                }
                let next = Node()
                current.labels[key] = next
                state.nodes += 1
                node = next
            }
        }
        return changed ? folded.joined(separator: ".") : name
    }

    /// `name` while fewer than `threshold` literals of its family were seen (or it is one of them);
    /// `placeholder` for good once more are.
    private func literal(_ name: String, in seen: inout Set<String>?, else placeholder: String) -> String {
        guard var literals = seen else { return placeholder }
        if literals.contains(name) { return name }
        guard literals.count < threshold else {
            seen = nil
            renderedSeries.invalidate()
            return placeholder
        }
        literals.insert(name)
        seen = literals
        return name
    }

    private func any(below node: Node, state: inout State) -> Node? {
        if let any = node.any { return any }
        guard state.nodes < maximumNodes else { return nil }
        let made = Node()
        node.any = made
        state.nodes += 1
        return made
    }

    /// Turns the position below `node` into `*`: its literal subtrees are dropped.
    private func learn(_ node: Node, state: inout State) {
        state.nodes -= node.labels.values.reduce(0) { $0 + Self.count($1) }
        node.labels = [:]
        node.learned = true
        if node.any == nil {
            node.any = Node()
            state.nodes += 1
        }
        renderedSeries.invalidate()
    }

    private static func count(_ node: Node) -> Int {
        1 + node.labels.values.reduce(0) { $0 + count($1) } + (node.any.map { count($0) } ?? 0)
    }

    /// Whether a label is numbered or random by its shape: three digits in a row or four in all
    /// (`ip-10-0-0-3`), or what a path segment would be templated as an id, UUID, hex or token (not a
    /// slug: `us-east-1` is a region).
    static func varies(_ label: Substring) -> Bool {
        var run = 0
        var digits = 0
        for byte in label.utf8 {
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                run += 1
                digits += 1
                if run >= 3 || digits >= 4 { return true }
            } else {
                run = 0
            }
        }
        switch PathTemplater.placeholder(for: label) {
        case "{id}", "{uuid}", "{hex}", "{token}": return true
        default: return false
        }
    }

    /// Four decimal numbers of at most three digits, separated by dots.
    static func isIPv4(_ name: String) -> Bool {
        var parts = 0
        var digits = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0 else { return false }
                parts += 1
                digits = 0
            } else if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                digits += 1
                if digits > 3 { return false }
            } else {
                return false
            }
        }
        return parts == 3 && digits > 0
    }
}
