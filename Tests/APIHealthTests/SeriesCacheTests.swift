import Testing

@testable import APIHealth

/// The rendered-series cache's hash: URLs that differ in one byte anywhere, of any length (the last
/// bytes are read in one load that overlaps the last word), spread over the cache's sets.
@Suite struct SeriesCacheTests {
    @Test func urlsDifferingInOneByteAnywhereHashApartAndSpreadOverTheSets() {
        var urls: [String] = []
        for id in 0..<4_096 { urls.append("https://api.example.com/v1/items/\(id)") }
        for length in 1..<40 {
            let base = String(repeating: "a", count: length)
            urls.append(base)
            for position in 0..<length {
                var bytes = Array(base.utf8)
                bytes[position] = UInt8(ascii: "b")
                urls.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        // Every byte value repeated, of every short length: no length cancels a first byte.
        for byte in UInt8.min...UInt8.max {
            for length in 1..<20 {
                urls.append(String(decoding: [UInt8](repeating: byte, count: length), as: UTF8.self))
            }
        }
        urls = Array(Set(urls))
        let hashes = urls.map { SeriesCache.hash($0, statusCode: 200) }
        #expect(Set(hashes).count == urls.count, "two URLs share a hash")
        let statuses = [nil, 200, 201, 202, 203, 404, 500, 503].map { SeriesCache.hash("/a", statusCode: $0) }
        #expect(Set(statuses).count == statuses.count, "two statuses share a hash")
        #expect(!hashes.contains(0), "0 marks an empty slot")
        // 4,096 ids over 1,024 sets, for URLs of three shapes: hardly a set unused (at random, 19 of
        // them would be; a hash whose low bits miss the URL's last bytes leaves a thousand), none with
        // more than a few times its share.
        for shape in ["https://api.example.com/v1/items/", "http://127.0.0.1:8080/users/", "https://a.example/p?q="] {
            var perSet = [Int](repeating: 0, count: SeriesCache.sets)
            for id in 0..<4_096 {
                perSet[
                    Int(truncatingIfNeeded: SeriesCache.hash("\(shape)\(id)", statusCode: 200)) & (SeriesCache.sets - 1)
                ] += 1
            }
            #expect(perSet.filter { $0 == 0 }.count < 64, "\(shape)")
            #expect(perSet.max()! <= 16, "\(shape)")
        }
    }
}
