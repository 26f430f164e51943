#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The country learned from the country header, kept in the spool directory for the next launch
/// (``CountryLearner``): one file the agent names, `.country`, read and written as the spool's other
/// files are (`O_NOFOLLOW`, a regular file of the spool's owner, written whole and renamed into place).
extension SpoolDirectory {
    static let countryName = ".country"

    /// The country an earlier launch kept, or `nil` when there is none or the file is no country code
    /// (a link, a file of another user, more than a few bytes, or anything but an assigned code).
    func learnedCountry() -> String? {
        mutex.acquire()
        let outcome = SafeRead.read(Self.countryName, in: rootDescriptor, owner: owner, atMost: 8)
        mutex.release()
        guard case .bytes(let bytes, _) = outcome else { return nil }
        return CountryCode(String(decoding: bytes, as: UTF8.self))?.code
    }

    /// Keeps `country` (a ``CountryCode``'s code) for the next launch; returns whether it was written.
    @discardableResult
    func keepLearnedCountry(_ country: String) -> Bool {
        guard let code = CountryCode(country)?.code else { return false }
        mutex.acquire()
        defer { mutex.release() }
        if isReleased { return false }
        return (try? writeFileAtomically(rootDescriptor, Self.countryName, bytes: Array(code.utf8))) != nil
    }
}
