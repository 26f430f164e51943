import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A GraphQL request's operation read from its body or URL, and what becomes of hostile names.
@Suite struct GraphQLOperationTests {
    private func segment(_ body: String?, query: String? = nil) -> String {
        GraphQLOperation.segment(body: body.map { Array($0.utf8) }, query: query)
    }

    @Test func theBodysOperationNameIsTheOperation() {
        #expect(segment(#"{"query":"query GetUser { me { id } }","operationName":"GetUser"}"#) == "GetUser")
        #expect(segment(#" {"operationName" : "ListOrders", "variables": {"first": 10}} "#) == "ListOrders")
        // Values before the name are skipped whatever they hold: strings with escapes, arrays, numbers.
        let skipped = #"{"variables":{"a":[1,-2.5e3,true,null,{"b":"\"}"}],"c":"\\"},"operationName":"_Op2"}"#
        #expect(segment(skipped) == "_Op2")
        // A UTF-8 byte order mark, as JSONSerialization accepts one.
        #expect(
            GraphQLOperation.segment(body: [0xEF, 0xBB, 0xBF] + Array(#"{"operationName":"A"}"#.utf8), query: nil)
                == "A"
        )
        // The body's name comes before the URL's.
        #expect(segment(#"{"operationName":"FromBody"}"#, query: "operationName=FromURL") == "FromBody")
    }

    @Test func aGetNamesItsOperationInItsQuery() {
        #expect(segment(nil, query: "query=query%20GetUser%20%7B%20me%20%7D&operationName=GetUser") == "GetUser")
        #expect(segment(nil, query: "operationName=&query=%7B%20me%20%7D") == GraphQLOperation.anonymous)
        #expect(segment(nil, query: "operationName=Get%20User") == GraphQLOperation.invalid)
    }

    @Test func aPersistedQueryIsItsHashsPrefix() {
        let hash = "ECF4EDB46DB40B5132295C0291D62FB65D6759A9EEDFA4D5D612DD5EC54A6B38"
        let body = #"{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"\#(hash)"}},"variables":{}}"#
        #expect(segment(body) == "{sha256:ecf4edb4}")
        let extensions = #"{"persistedQuery":{"version":1,"sha256Hash":"\#(hash)"}}"#
            .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        #expect(segment(nil, query: "extensions=\(extensions)") == "{sha256:ecf4edb4}")
        // A name, where there is one, is the operation.
        #expect(
            segment(#"{"extensions":{"persistedQuery":{"sha256Hash":"\#(hash)"}},"operationName":"Feed"}"#) == "Feed"
        )
        #expect(segment(nil, query: "operationName=Feed&extensions=\(extensions)") == "Feed")
        // A hash that is not hex digits is no hash.
        #expect(segment(#"{"extensions":{"persistedQuery":{"sha256Hash":"../../x"}}}"#) == GraphQLOperation.invalid)
    }

    @Test func anUnnamedOperationIsAnonymous() {
        #expect(segment(#"{"query":"{ me { id } }"}"#) == GraphQLOperation.anonymous)
        #expect(segment(#"{"query":"{ me { id } }","operationName":null}"#) == GraphQLOperation.anonymous)
        #expect(segment(#"{"query":"{ me { id } }","operationName":""}"#) == GraphQLOperation.anonymous)
        #expect(segment(nil, query: "query=%7B%20me%20%7D") == GraphQLOperation.anonymous)
        #expect(segment("") == GraphQLOperation.anonymous)
        #expect(segment(#"[{"operationName":"A"},{"operationName":"B"}]"#) == GraphQLOperation.batch)
    }

    @Test func aBodyCutOffOrTooLongBeforeItsNameIsUnknown() {
        // Cut off before the name.
        #expect(segment(#"{"query":"query GetUser { me "#) == GraphQLOperation.unknown)
        // The name past the first 64 KiB read.
        let long = String(repeating: "x", count: GraphQLOperation.maximumBodyBytes)
        #expect(segment(#"{"query":"\#(long)","operationName":"Late"}"#) == GraphQLOperation.unknown)
        // A name within them, whatever follows.
        #expect(segment(#"{"operationName":"Early","variables":{"blob":"\#(long)\#(long)"}}"#) == "Early")
        #expect(
            Data(#"{"query":"\#(long)","operationName":"Late"}"#.utf8).withUnsafeBytes {
                GraphQLOperation.segment(bodyBytes: $0, query: "operationName=Late")
            } == "Late",
            "the URL still names it"
        )
    }

    @Test func aBodyThatIsNotJSONIsUnknown() {
        #expect(segment("<html>") == GraphQLOperation.unknown)
        #expect(segment(#"{"operationName": GetUser}"#) == GraphQLOperation.unknown)
        #expect(segment(#"{"query" "x", "operationName":"A"}"#) == GraphQLOperation.unknown)
        #expect(
            segment(String(repeating: #"{"a":"#, count: 100) + "1" + String(repeating: "}", count: 100))
                == GraphQLOperation.unknown
        )
        #expect(GraphQLOperation.segment(unreadableBodyWithQuery: nil) == GraphQLOperation.unknown)
        #expect(GraphQLOperation.segment(unreadableBodyWithQuery: "operationName=Streamed") == "Streamed")
    }

    @Test func namesThatAreNoGraphQLNamesAreInvalidAndLongOnesCut() {
        for hostile in ["../../etc/passwd", "Get User", "1stQuery", "名前", "a,b=c", #"Get\u0055ser"#, "a\\\"b", "-x"] {
            #expect(segment(#"{"operationName":"\#(hostile)"}"#) == GraphQLOperation.invalid, "\(hostile)")
        }
        let long = "Q" + String(repeating: "a", count: 200)
        #expect(segment(#"{"operationName":"\#(long)"}"#) == String(long.prefix(GraphQLOperation.maximumNameBytes)))
        #expect(segment(#"{"operationName":"_"}"#) == "_")
    }

    @Test func onlyTheConfiguredPathsAreGraphQL() throws {
        let endpoints = try #require(GraphQLEndpoints(paths: ["/graphql", "/api/gql/"]))
        for url in [
            "https://api.example.com/graphql", "https://api.example.com/graphql/",
            "http://h:8080/graphql?operationName=A",
            "https://h/graphql#x", "https://h/api/gql", "https://h/graphql//?a=1", "https://h/api/gql//",
        ] {
            #expect(endpoints.matches(url), "\(url)")
        }
        for url in [
            "https://graphql/", "https://h/graphqlx", "https://h/v1/graphql", "https://h/GraphQL",
            "https://h/?/graphql",
            "https://h", "graphql", "https://h/api/gql/x", "https://h/graphql/x", "https://h//graphql",
            "https://h/graph", "https://h/graphql/x?y", "https://h/api/gqlx",
        ] {
            #expect(!endpoints.matches(url), "\(url)")
        }
        #expect(GraphQLEndpoints(paths: []) == nil)
        #expect(GraphQLEndpoints(paths: ["graphql", "/"]) == nil)
    }

    @Test func aURLSessionRequestsBodyIsReadOnlyWhenItHoldsIt() {
        let url = "https://api.example.com/graphql"
        var post = URLRequest(url: URL(string: url)!)
        post.httpMethod = "POST"
        post.httpBody = Data(#"{"operationName":"GetUser"}"#.utf8)
        #expect(GraphQLOperation.segment(of: post, url: url) == "GetUser")
        post.httpBody = nil
        #expect(GraphQLOperation.segment(of: post, url: url) == GraphQLOperation.unknown, "an upload task's body")
        post.httpBodyStream = InputStream(data: Data(#"{"operationName":"GetUser"}"#.utf8))
        #expect(GraphQLOperation.segment(of: post, url: url) == GraphQLOperation.unknown)
        let get = URLRequest(url: URL(string: url + "?operationName=Feed")!)
        #expect(GraphQLOperation.segment(of: get, url: url + "?operationName=Feed") == "Feed")
    }

    @Test func eachOperationIsAnEndpointOfItsOwnAndOthersKeepTheirPaths() throws {
        let agent = try APIHealthAgent(configuration: Self.configuration(), logger: Logger(label: "graphql-tests"))
        for (operation, count) in [("GetUser", 3), ("ListOrders", 2), (GraphQLOperation.anonymous, 1)] {
            for _ in 0..<count { agent.record(Self.sample(operation: operation)) }
        }
        var plain = Self.sample(operation: nil)
        plain.url = URL(string: "https://api.example.com/users/42")!
        agent.record(plain)
        var unnamed = Self.sample(operation: nil)
        unnamed.url = URL(string: "https://api.example.com/graphql")!
        agent.record(unnamed)
        let paths = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
            .map { $0.tag("path") ?? "" }
        #expect(
            Dictionary(paths.map { ($0, 1) }, uniquingKeysWith: +)
                == [
                    "/graphql/GetUser": 3, "/graphql/ListOrders": 2, "/graphql/{anonymous}": 1, "/users/{id}": 1,
                    "/graphql": 1,
                ]
        )
    }

    @Test func tenThousandOperationNamesStayWithinThePathCap() throws {
        var configuration = Self.configuration()
        configuration.capture.maximumDistinctPaths = 500
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "graphql-tests"))
        for index in 0..<10_000 { agent.record(Self.sample(operation: "Operation\(index)")) }
        let paths = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
            .map { $0.tag("path") ?? "" }
        #expect(paths.count == 10_000)
        let distinct = Set(paths)
        #expect(distinct.count == 501, "500 operations and the overflow path")
        #expect(distinct.contains(configuration.capture.overflowPath))
        #expect(paths.filter { $0 == configuration.capture.overflowPath }.count == 9_500)
        #expect(agent.schema.pathsOverflowed == 9_500)
    }

    /// An agent that writes a point for every request, with no destination.
    private static func configuration() -> APIHealthConfiguration {
        var configuration = APIHealthConfiguration(serviceName: "graphql-tests")
        configuration.capture.rawPoints = .all
        configuration.aggregation = nil
        configuration.batching.maximumLines = 20_000
        configuration.batching.maximumBytes = 8 << 20
        return configuration
    }

    private static func sample(operation: String?) -> RequestSample {
        var sample = RequestSample(
            method: "POST",
            url: URL(string: "https://api.example.com/graphql")!,
            module: "app",
            startedAt: Date(),
            duration: .milliseconds(12),
            statusCode: 200
        )
        if let operation { sample.setGraphQLOperation(operation) }
        return sample
    }
}
