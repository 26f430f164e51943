@_spi(Reflection) import Swift
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The header fields swift-corelibs-foundation keeps in an `HTTPURLResponse`, read as ``CorelibsTask`` reads a
/// task: through the reflection metadata of the Swift class. `allHeaderFields` builds a dictionary of
/// `AnyHashable` and `Any` on every read, and `value(forHTTPHeaderField:)` lowercases every header for every
/// name it is asked; the fields themselves are a `[String: String]` set when the response is made and never
/// changed. Where the field is not found as expected (Apple platforms, or a Foundation that names or lays it
/// out otherwise) they read as absent, and the caller uses `allHeaderFields`.
enum CorelibsResponse {
    /// The header fields of `response`, as the server sent them.
    static func headerFields(of response: HTTPURLResponse) -> [String: String]? {
        guard let offset = headerFieldsOffset else { return nil }
        return withExtendedLifetime(response) {
            UnsafeRawPointer(Unmanaged.passUnretained(response).toOpaque())
                .load(fromByteOffset: offset, as: [String: String].self)
        }
    }

    /// The byte offset in an `HTTPURLResponse` of `_allHeaderFields`, found once.
    private static let headerFieldsOffset: Int? = {
        #if canImport(Darwin)
        return nil
        #else
        var found: Int?
        // `.classType` and `.ignoreUnknown`, by value (see ``CorelibsTask``).
        let options = _EachFieldOptions(rawValue: 1 << 0 | 1 << 1)
        _forEachField(of: HTTPURLResponse.self, options: options) { name, offset, type, _ in
            guard String(cString: name) == "_allHeaderFields", type == [String: String].self else { return true }
            found = offset
            return false
        }
        return found
        #endif
    }()
}
