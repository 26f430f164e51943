/// Learns from the traffic itself which path positions hold parameters, and turns paths into the
/// templates that become the `path` tag, within a cap of distinct templates.
///
/// Per (host, method) it keeps a tree of the literal segments seen at each position under the same
/// template prefix. When a position under one prefix passes `threshold` distinct literal values, it
/// becomes a parameter for that prefix, for past and future requests alike: `{slug}` when every value
/// seen was a lowercase hyphenated word, `{token}` when every value was one run of letters and digits,
/// `{param}` otherwise. Segments the automatic rules recognise (`{id}`, `{uuid}`, `{hex}`, `{email}`,
/// `{token}`) never count as literal values; literal segments are lowercased, so `/Items/A1` and
/// `/items/a1` are one endpoint.
///
/// Stable series: a position only ever goes from literal to parameter, once, and never back (nothing
/// that has become a parameter is forgotten), so the template of a URL changes at most once per
/// position (when that position is learned) and is the same for every later request.
///
/// Bounded memory: at most `maximumNodes` tree nodes (20 × the distinct-path cap by default), each
/// holding at most `threshold` literal children; once that many nodes exist, new literals are
/// templated but not learned. The distinct-path cap counts templates in use: when a position is
/// learned, the templates of its literal values give their places back.
final class EndpointLearner: Sendable {
    private final class Node {
        var literals: [String: Node] = [:]
        var recognised: [String: Node] = [:]
        var parameter: (name: String, node: Node)?
        var kinds = ValueKinds.all
    }

    private struct State {
        var roots: [String: Node] = [:]
        var nodes = 0
        /// `host template` values in use, for the cap.
        var templatesInUse: Set<String> = []
        var overflowed: UInt64 = 0
        var learned: UInt64 = 0
    }

    private let threshold: Int
    private let maximumNodes: Int
    private let maximumTemplates: Int
    private let overflowPath: String
    /// Guards the trees and the templates in use; all of it is only ever read and changed under it.
    private let state: Locked<State>

    /// - Parameters:
    ///   - threshold: Distinct literal values at one position under one prefix past which it
    ///     becomes a parameter.
    ///   - maximumTemplates: Distinct (host, template) values before new ones become `overflowPath`.
    init(threshold: Int, maximumTemplates: Int, overflowPath: String) {
        self.threshold = max(threshold, 1)
        self.maximumTemplates = maximumTemplates
        self.maximumNodes = max(maximumTemplates, 1) * 20
        self.overflowPath = overflowPath
        self.state = Locked(State())
    }

    /// Paths that fell past the cap.
    var overflowed: UInt64 { state.withLock { $0.overflowed } }
    /// Positions learned as parameters so far; each one changes the templates of the URLs under it
    /// once, so caches of templates are stale when it moves.
    var positionsLearned: UInt64 { learnedCount.withLock { $0 } }
    /// Guards a copy of `State.learned`, read for every sample without waiting for the trees' lock.
    private let learnedCount = Locked<UInt64>(0)

    /// `template` (a user rule's) if the cap admits it, else the overflow path.
    func admit(host: String, template: String) -> String {
        state.withLock { state in admit(host: host, template: template, state: &state) }
    }

    private func admit(host: String, template: String, state: inout State) -> String {
        let key = host + " " + template
        if state.templatesInUse.contains(key) { return template }
        if state.templatesInUse.count < maximumTemplates {
            state.templatesInUse.insert(key)
            return template
        }
        state.overflowed += 1
        return overflowPath
    }

    /// The template of `segments` (already split on `/`) for `host` and `method`, or the overflow path.
    func template(host: String, method: String, segments: [Substring]) -> String {
        state.withLock { state -> String in
            let rootKey = host + " " + method
            let root: Node
            if let existing = state.roots[rootKey] {
                root = existing
            } else {
                root = Node()
                state.roots[rootKey] = root
                state.nodes += 1
            }
            var node = root
            var template = ""
            for segment in segments.prefix(64) {
                template += "/"
                if let placeholder = PathTemplater.placeholder(for: segment) {
                    template += placeholder
                    node = child(of: node, placeholder, in: \.recognised, state: &state)
                    continue
                }
                if let parameter = node.parameter {
                    template += parameter.name
                    node = parameter.node
                    continue
                }
                let literal = segment.lowercased()
                if let next = node.literals[literal] {
                    template += literal
                    node = next
                    continue
                }
                if node.literals.count >= threshold {
                    let name = node.kinds.intersection(ValueKinds(of: literal)).parameterName
                    learn(node, prefix: String(template.dropLast()), host: host, name: name, state: &state)
                    template += name
                    node = node.parameter?.node ?? node
                    continue
                }
                node.kinds.formIntersection(ValueKinds(of: literal))
                template += literal
                node = child(of: node, literal, in: \.literals, state: &state)
            }
            if template.isEmpty { template = "/" }
            return admit(host: host, template: template, state: &state)
        }
    }

    private func child(
        of node: Node,
        _ name: String,
        in table: ReferenceWritableKeyPath<Node, [String: Node]>,
        state: inout State
    ) -> Node {
        if let existing = node[keyPath: table][name] { return existing }
        let created = Node()
        // Past the node bound the segment is still templated, but nothing below it is learned.
        guard state.nodes < maximumNodes else { return created }
        node[keyPath: table][name] = created
        state.nodes += 1
        return created
    }

    /// Turns the literal position below `node` into a parameter: its literal subtrees are dropped and
    /// the templates written for them give their places under the cap back.
    private func learn(_ node: Node, prefix: String, host: String, name: String, state: inout State) {
        let released = node.literals.keys.map { host + " " + prefix + "/" + $0 }
        state.templatesInUse = state.templatesInUse.filter { key in
            !released.contains { key == $0 || key.hasPrefix($0 + "/") }
        }
        state.nodes -= node.literals.values.reduce(0) { $0 + Self.count($1) }
        node.literals = [:]
        node.parameter = (name, Node())
        state.nodes += 1
        state.learned += 1
        learnedCount.withLock { $0 += 1 }
    }

    private static func count(_ node: Node) -> Int {
        1 + node.literals.values.reduce(0) { $0 + count($1) } + node.recognised.values.reduce(0) { $0 + count($1) }
            + (node.parameter.map { count($0.node) } ?? 0)
    }
}

/// What the literal values seen at one position have in common, to name the parameter they become.
struct ValueKinds: OptionSet, Sendable {
    let rawValue: UInt8
    /// Lowercase words and digits joined by hyphens (`alpha-bravo-123`).
    static let slug = ValueKinds(rawValue: 1)
    /// One run of letters and digits (`AbC12x`).
    static let token = ValueKinds(rawValue: 2)
    static let all: ValueKinds = [.slug, .token]

    init(rawValue: UInt8) { self.rawValue = rawValue }

    init(of value: String) {
        var kinds: ValueKinds = []
        let bytes = value.utf8
        let alphanumeric = bytes.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90)
        }
        if alphanumeric { kinds.insert(.token) }
        let slugBytes = bytes.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 122) || $0 == 45 }
        if slugBytes && bytes.contains(45) && bytes.first != 45 && bytes.last != 45 { kinds.insert(.slug) }
        self = kinds
    }

    var parameterName: String {
        if contains(.slug) { return "{slug}" }
        if contains(.token) { return "{token}" }
        return "{param}"
    }
}
