/// Learns from the traffic itself which path positions hold parameters, and turns paths into the
/// templates that become the `path` tag, within a cap of distinct templates.
///
/// Per (host, method) it keeps a tree of the segments seen at each position under the same template
/// prefix.
///
/// - **One name per position.** A position's parameter is named once, by the first value that needs
///   one: a segment the automatic rules recognise by its shape (`{id}`, `{uuid}`, `{date}`, `{hex}`,
///   `{email}`, `{slug}`, `{token}`: see ``PathTemplater``), or the position's learning. Every later
///   value that needs a parameter there gets that name, whatever its own shape, so one endpoint is one
///   template (a product position whose first value was `red-shoes-12` stays `{slug}` when a longer
///   one would look like a token).
/// - **Learning.** When a position under one prefix passes `threshold` distinct literal values, it
///   becomes its parameter for past and future requests alike, named (when it has no name yet) `{slug}`
///   if every value seen was a lowercase hyphenated word, `{token}` if every value was one run of
///   letters and digits, `{param}` otherwise. Literal segments are lowercased, so `/Items/A1` and
///   `/items/a1` are one endpoint.
/// - **No literal values while learning.** A literal seen for the first time at its position is
///   written as itself only when it looks like a word (`health`, `v2`, `user-settings`) and its position
///   has fewer than `threshold / 4` (at least one) values seen only once. Otherwise the request's path
///   is written as ``newPath`` until that value is seen again (a fixed endpoint, written as itself from
///   then on) or its position is learned (a parameter). So the values of a position still being
///   learned (article slugs, handles, tokens the rules miss) never become series of their own.
///
/// Stable series: a position only ever goes from literal to parameter, once, and never back (nothing
/// that has become a parameter is forgotten), so the template of a URL changes at most once per
/// position (when that position is learned) and is the same for every later request; a URL written
/// as ``newPath`` gets its template on a later request.
///
/// Bounded memory: at most `maximumNodes` tree nodes (20 × the distinct-path cap by default), each
/// holding at most `threshold` literal children; once that many nodes exist, new literals are written
/// as themselves but not learned. The distinct-path cap counts templates in use (``newPath`` is not
/// one): when a position is learned, the templates of its literal values give their places back.
// `@unchecked Sendable`: the agent's record loop is the only thread that touches a learner (``RecordLoop``);
// the schema that holds it is shared, the learner's trees are not.
final class EndpointLearner: @unchecked Sendable {
    /// The path tag of a request with a segment not seen before at its position that does not look
    /// like the name of a fixed endpoint, until it is seen again or its position is learned.
    static let newPath = "{new}"

    private final class Node {
        /// The template of the path down to this node (`""` for a root), kept so that a path's
        /// template is the node its walk ends on, not a string built again for every request.
        let template: String
        /// `State.learned` when this node's template was last admitted under the cap: until a position
        /// is learned (the only event that takes an admitted template out), it still is.
        var admittedAt: UInt64?
        /// The literal values seen at the position below this node.
        var literals: [String: Node] = [:]
        /// The literal last found in `literals` and its node: a path walked again and again is found by
        /// comparing its segment, without hashing it.
        var recentLiteral: (value: String, node: Node)?
        /// How many of `literals` were seen once only.
        var singletons = 0
        /// Whether this node, as a literal value, was seen more than once.
        var seenAgain = false
        /// The position's parameter, named once.
        var parameter: (name: String, node: Node)?
        /// Whether every value not among `literals` is the parameter: the position was learned.
        var learned = false
        var kinds = ValueKinds.all

        init(template: String) { self.template = template }

        /// A node for the position below this one, named `name`.
        func below(_ name: String) -> Node { Node(template: template + "/" + name) }
    }

    /// A tree's root: the host and method whose paths it learns.
    private struct RootKey: Hashable {
        var host: String
        var method: String
    }

    private struct State {
        var roots: [RootKey: Node] = [:]
        /// The root last found in `roots` (roots are never taken out).
        var recentRoot: (key: RootKey, node: Node)?
        var nodes = 0
        /// `host template` values in use, for the cap.
        var templatesInUse: Set<String> = []
        var overflowed: UInt64 = 0
        /// Of `overflowed`, those not yet taken by ``takeOverflowed()``.
        var overflowedUntaken: UInt64 = 0
        var learned: UInt64 = 0
        /// Bumped by every change to what a path's template depends on (see ``changes``).
        var changes: UInt64 = 0
    }

    private let threshold: Int
    /// Values seen once at a position past which a new one is held back as ``newPath``.
    private let maximumSingletons: Int
    private let maximumNodes: Int
    private let maximumTemplates: Int
    private let overflowPath: String
    /// Invalidated when a position is learned.
    private let renderedSeries: RenderedSeries
    /// The trees and the templates in use.
    private var state = State()

    /// - Parameters:
    ///   - threshold: Distinct literal values at one position under one prefix past which it
    ///     becomes a parameter.
    ///   - maximumTemplates: Distinct (host, template) values before new ones become `overflowPath`.
    ///   - renderedSeries: Invalidated on every position learned.
    init(threshold: Int, maximumTemplates: Int, overflowPath: String, renderedSeries: RenderedSeries = RenderedSeries())
    {
        self.renderedSeries = renderedSeries
        self.threshold = max(threshold, 1)
        self.maximumSingletons = max(threshold / 4, 1)
        self.maximumTemplates = maximumTemplates
        self.maximumNodes = max(maximumTemplates, 1) * 20
        self.overflowPath = overflowPath
    }

    /// Paths that fell past the cap.
    var overflowed: UInt64 { state.overflowed }
    /// Positions learned as parameters so far; each one changes the templates of the URLs under it
    /// once, so caches of templates are stale when it moves.
    var positionsLearned: UInt64 { state.learned }
    /// Bumped by every change the templating of a path made (a node, a value seen again, a position
    /// learned, a template admitted): templating a path again when it changed nothing gives the same
    /// template and changes nothing again, until a position is learned (which invalidates the rendered
    /// series).
    var changes: UInt64 { state.changes }

    /// The paths that fell past the cap since the last call.
    func takeOverflowed() -> UInt64 {
        defer { state.overflowedUntaken = 0 }
        return state.overflowedUntaken
    }

    /// Runs `body` on the trees: one access at a time (the record loop's), as the helpers below take
    /// them `inout` from it.
    @inline(__always)
    private func withState<Result>(_ body: (inout State) -> Result) -> Result { body(&state) }

    /// `template` (a user rule's) if the cap admits it, else the overflow path.
    func admit(host: String, template: String) -> String {
        withState { state in admit(host: host, template: template, state: &state) }
    }

    private func admit(host: String, template: String, state: inout State) -> String {
        let key = host + " " + template
        if state.templatesInUse.contains(key) { return template }
        state.changes &+= 1
        if state.templatesInUse.count < maximumTemplates {
            state.templatesInUse.insert(key)
            return template
        }
        state.overflowed += 1
        state.overflowedUntaken += 1
        return overflowPath
    }

    /// The template of `path` for `host` and `method`, ``newPath``, or the overflow path.
    func template(host: String, method: String, path: Substring) -> String {
        template(host: host, method: method, segments: PathSegments(path))
    }

    private func template(host: String, method: String, segments: some Sequence<PathSegment>) -> String {
        withState { state -> String in
            let rootKey = RootKey(host: host, method: method)
            let root: Node
            if let recent = state.recentRoot, recent.key == rootKey {
                root = recent.node
            } else if let existing = state.roots[rootKey] {
                root = existing
                state.recentRoot = (rootKey, existing)
            } else {
                root = Node(template: "")
                state.roots[rootKey] = root
                state.nodes += 1
                state.changes &+= 1
            }
            var node = root
            var heldBack = false
            for (position, segment) in segments.enumerated() {
                guard position < 64 else { break }
                if let placeholder = segment.placeholder {
                    node = parameter(of: node, named: placeholder, state: &state).node
                    continue
                }
                if node.learned, let parameter = node.parameter {
                    node = parameter.node
                    continue
                }
                let literal = segment.lowercased
                if let recent = node.recentLiteral, recent.value == literal {
                    node = recent.node
                    continue
                }
                if let next = node.literals[literal] {
                    node.recentLiteral = (literal, next)
                    if !next.seenAgain {
                        next.seenAgain = true
                        node.singletons -= 1
                        state.changes &+= 1
                    }
                    node = next
                    continue
                }
                if node.literals.count >= threshold {
                    node = learn(node, host: host, literal: literal, state: &state).node
                    continue
                }
                state.changes &+= 1
                node.kinds.formIntersection(ValueKinds(of: literal))
                let (next, kept) = child(of: node, literal, state: &state)
                if kept {
                    if node.singletons >= maximumSingletons || !Self.looksLikeWord(segment.text) { heldBack = true }
                    node.singletons += 1
                }
                node = next
            }
            if heldBack { return Self.newPath }
            let template = node.template.isEmpty ? "/" : node.template
            if node.admittedAt == state.learned { return template }
            let admitted = admit(host: host, template: template, state: &state)
            if admitted != overflowPath {
                node.admittedAt = state.learned
                state.changes &+= 1
            }
            return admitted
        }
    }

    /// The parameter of the position below `node`, named `name` if it has none yet.
    private func parameter(of node: Node, named name: String, state: inout State) -> (name: String, node: Node) {
        if let existing = node.parameter { return existing }
        let created = (name: name, node: node.below(name))
        // Past the node bound the segment is still templated, but nothing below it is learned.
        guard state.nodes < maximumNodes else { return created }
        node.parameter = created
        state.nodes += 1
        state.changes &+= 1
        return created
    }

    /// The literal child `name` of `node`, made now, and whether it is kept in the tree.
    private func child(of node: Node, _ name: String, state: inout State) -> (Node, kept: Bool) {
        let created = node.below(name)
        // Past the node bound the segment is still templated, but nothing below it is learned.
        guard state.nodes < maximumNodes else { return (created, false) }
        node.literals[name] = created
        state.nodes += 1
        return (created, true)
    }

    /// Turns the literal position below `node` into its parameter (named from its values and
    /// `literal`, the value that passed the threshold, unless it has a name): its literal subtrees are
    /// dropped and the templates written for them give their places under the cap back.
    private func learn(
        _ node: Node,
        host: String,
        literal: String,
        state: inout State
    ) -> (name: String, node: Node) {
        let released = node.literals.keys.map { host + " " + node.template + "/" + $0 }
        state.templatesInUse = state.templatesInUse.filter { key in
            !released.contains { key == $0 || key.hasPrefix($0 + "/") }
        }
        state.nodes -= node.literals.values.reduce(0) { $0 + Self.count($1) }
        node.literals = [:]
        node.recentLiteral = nil
        node.singletons = 0
        node.learned = true
        let parameter: (name: String, node: Node)
        if let existing = node.parameter {
            parameter = existing
        } else {
            let name = node.kinds.intersection(ValueKinds(of: literal)).parameterName
            parameter = (name, node.below(name))
            node.parameter = parameter
            state.nodes += 1
        }
        state.learned += 1
        state.changes &+= 1
        renderedSeries.invalidate()
        return parameter
    }

    private static func count(_ node: Node) -> Int {
        1 + node.literals.values.reduce(0) { $0 + count($1) } + (node.parameter.map { count($0.node) } ?? 0)
    }

    /// Whether a segment looks like the name of a fixed endpoint: one or two words (joined by `-`, `_`
    /// or `.`) of letters, each with an optional number after them and a capital, if any, only at its
    /// start or throughout (`health`, `v2`, `oauth2`, `user-settings`, `Index.html`, `API`), at most 32
    /// bytes. Words with capitals inside (`getUser`, or an opaque token the rules miss) are not.
    static func looksLikeWord(_ segment: Substring) -> Bool {
        var words = 1
        var letters = 0
        var capitals = 0
        var digits = 0
        var bytes = 0
        var firstCapital = false
        func wordEnds() -> Bool {
            letters > 0 && (capitals == 0 || capitals == letters || (capitals == 1 && firstCapital))
        }
        for byte in segment.utf8 {
            bytes += 1
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                if digits > 0 { return false }
                if byte <= UInt8(ascii: "Z") {
                    if letters == 0 { firstCapital = true }
                    capitals += 1
                }
                letters += 1
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if letters == 0 { return false }
                digits += 1
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                if words == 2 || !wordEnds() { return false }
                words += 1
                letters = 0
                capitals = 0
                digits = 0
                firstCapital = false
            default:
                return false
            }
        }
        return wordEnds() && bytes <= 32
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
