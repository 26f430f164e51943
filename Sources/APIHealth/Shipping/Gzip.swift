import CZlib

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Gzip (RFC 1952) compression, as the write API's `Content-Encoding: gzip` expects.
///
/// Batches are compressed with libdeflate when the system has it (Debian's `libdeflate0`, Homebrew's
/// `libdeflate`), loaded when first needed, and with zlib otherwise: libdeflate compresses a whole
/// buffer at once, about 1.5 times as fast as zlib at level 1, into output of the same size or
/// smaller. Both write standard gzip that every server and `gunzip` read. Decompression is zlib's.
///
/// ```swift
/// let body = try Gzip.compress(lines, level: 1)
/// request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
/// ```
@_spi(Benchmarking) public enum Gzip {
    /// The library that compresses.
    public enum Implementation: String, Sendable, CaseIterable {
        case libdeflate
        case zlib
    }

    /// What ``compress(_:level:)`` uses here: libdeflate when the system has it, else zlib.
    public static var implementation: Implementation { Libdeflate.shared == nil ? .zlib : .libdeflate }

    /// What zlib reported when it could not do its work.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public var code: Int32
        public var operation: String
        public var description: String { "zlib \(operation) failed with code \(code)" }
    }

    /// The zlib levels: 0 (store) to 9 (smallest). 1 is fastest, 6 is zlib's default.
    package static let levels: ClosedRange<Int> = 0...9

    /// One complete gzip member holding `input`, at `level` (clamped to ``levels``).
    public static func compress(_ input: [UInt8], level: Int = 6) throws(Failure) -> [UInt8] {
        var output: [UInt8] = []
        try compress(input, level: level, into: &output)
        return output
    }

    /// Appends one complete gzip member holding `input` to `output`; with `workspace`, in the memory it
    /// keeps from the last compression (see ``GzipWorkspace``).
    public static func compress(
        _ input: [UInt8],
        level: Int,
        into output: inout [UInt8],
        keeping workspace: GzipWorkspace? = nil
    ) throws(Failure) {
        try compress(input, level: level, using: implementation, into: &output, keeping: workspace)
    }

    /// Appends one complete gzip member holding `input` to `output`, compressed by `implementation`
    /// (zlib when libdeflate is asked for but missing, and for level 0). libdeflate compresses in
    /// `workspace`'s memory when one is given, else in memory of its own, freed after.
    ///
    /// ```swift
    /// var body: [UInt8] = []
    /// try Gzip.compress(lines, level: 1, using: .zlib, into: &body)
    /// ```
    public static func compress(
        _ input: [UInt8],
        level: Int,
        using implementation: Implementation,
        into output: inout [UInt8],
        keeping workspace: GzipWorkspace? = nil
    ) throws(Failure) {
        let clamped = min(max(level, levels.lowerBound), levels.upperBound)
        if implementation == .libdeflate, clamped > 0, let library = Libdeflate.shared {
            try library.compress(input, level: clamped, into: &output, keeping: workspace)
            return
        }
        var stream = z_stream()
        // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of a zlib wrapper.
        var status = deflateInit2_(
            &stream,
            Int32(clamped),
            Z_DEFLATED,
            15 + 16,
            8,
            Z_DEFAULT_STRATEGY,
            ZLIB_VERSION,
            Int32(MemoryLayout<z_stream>.size)
        )
        guard status == Z_OK else { throw Failure(code: status, operation: "deflateInit2") }
        defer { deflateEnd(&stream) }

        // Written a chunk at a time and appended, so no output bound is reserved and filled first.
        let start = output.count
        status = input.withUnsafeBufferPointer { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            stream.avail_in = UInt32(source.count)
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32 * 1024) { chunk in
                var result: Int32
                repeat {
                    stream.next_out = chunk.baseAddress
                    stream.avail_out = UInt32(chunk.count)
                    // Z_OK: the chunk is full and more is to come; anything else ends it.
                    result = deflate(&stream, Z_FINISH)
                    let written = chunk.count - Int(stream.avail_out)
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[..<written]))
                } while result == Z_OK
                return result
            }
        }
        guard status == Z_STREAM_END else {
            output.removeSubrange(start...)
            throw Failure(code: status, operation: "deflate")
        }
    }

    /// The concatenated contents of every gzip member in `input`.
    public static func decompress(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        try decompress(input, limit: Int.max)
    }

    /// The concatenated contents of every gzip member in `input`, or ``Failure`` (operation
    /// `inflate (over the limit)`) as soon as they pass `limit` bytes: for bodies from untrusted senders.
    package static func decompress(_ input: [UInt8], limit: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        var status = inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw Failure(code: status, operation: "inflateInit2") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var consumed = 0
        while consumed < input.count {
            status = input.withUnsafeBufferPointer { source in
                chunk.withUnsafeMutableBufferPointer { destination in
                    stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress! + consumed)
                    stream.avail_in = UInt32(source.count - consumed)
                    stream.next_out = destination.baseAddress
                    stream.avail_out = UInt32(destination.count)
                    let result = inflate(&stream, Z_NO_FLUSH)
                    consumed = source.count - Int(stream.avail_in)
                    return result
                }
            }
            output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
            if output.count > limit { throw Failure(code: Z_BUF_ERROR, operation: "inflate (over the limit)") }
            if status == Z_STREAM_END {
                guard consumed < input.count else { break }
                inflateReset(&stream)
            } else if status != Z_OK {
                throw Failure(code: status, operation: "inflate")
            }
        }
        guard status == Z_STREAM_END else { throw Failure(code: status, operation: "inflate (truncated input)") }
        return output
    }
}

/// libdeflate's whole-buffer gzip compressor, looked up in the system's shared library at run time, so
/// the package builds without its headers and runs without it (falling back to zlib).
final class Libdeflate: Sendable {
    private typealias AllocateCompressor = @convention(c) (Int32) -> OpaquePointer?
    typealias FreeCompressor = @convention(c) (OpaquePointer?) -> Void
    private typealias CompressBound = @convention(c) (OpaquePointer?, Int) -> Int
    private typealias Compress =
        @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int) -> Int

    private let allocateCompressor: AllocateCompressor
    private let freeCompressor: FreeCompressor
    private let compressBound: CompressBound
    private let gzipCompress: Compress

    /// The system's libdeflate, or `nil` when it has none.
    static let shared: Libdeflate? = Libdeflate()

    private static let libraryNames = [
        "libdeflate.so.0", "libdeflate.so", "libdeflate.0.dylib", "/opt/homebrew/lib/libdeflate.0.dylib",
        "/usr/local/lib/libdeflate.0.dylib",
    ]

    private init?() {
        guard let handle = Self.libraryNames.lazy.compactMap({ dlopen($0, RTLD_NOW | RTLD_LOCAL) }).first else {
            return nil
        }
        func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
            dlsym(handle, name).map { unsafeBitCast($0, to: type) }
        }
        guard let allocate = symbol("libdeflate_alloc_compressor", as: AllocateCompressor.self),
            let free = symbol("libdeflate_free_compressor", as: FreeCompressor.self),
            let bound = symbol("libdeflate_gzip_compress_bound", as: CompressBound.self),
            let compress = symbol("libdeflate_gzip_compress", as: Compress.self)
        else {
            dlclose(handle)
            return nil
        }
        // The library stays loaded for the life of the process.
        allocateCompressor = allocate
        freeCompressor = free
        compressBound = bound
        gzipCompress = compress
    }

    /// Appends one gzip member holding `input`, at `level` (1–9), in `kept`'s workspace when one is given
    /// (made or remade at this level first), else in one of its own.
    func compress(
        _ input: [UInt8],
        level: Int,
        into output: inout [UInt8],
        keeping kept: GzipWorkspace?
    ) throws(Gzip.Failure) {
        let workspace: Workspace
        if let reused = kept?.libdeflate, reused.level == Int32(level) {
            workspace = reused
        } else {
            workspace = try makeWorkspace(level: Int32(level))
            kept?.libdeflate = workspace
        }
        let bound = compressBound(workspace.compressor, input.count)
        let keepsScratch = bound <= Self.largestKeptScratch
        let scratch =
            keepsScratch ? workspace.scratch(holding: bound) : .allocate(byteCount: bound, alignment: 16)
        defer { if !keepsScratch { scratch.deallocate() } }
        let written = input.withUnsafeBytes { source in
            gzipCompress(workspace.compressor, source.baseAddress, source.count, scratch.baseAddress, bound)
        }
        guard written > 0 else { throw Gzip.Failure(code: -5, operation: "libdeflate_gzip_compress") }
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<written]))
    }

    /// A compressor at one level and the buffer it writes into, used by one compression at a time and
    /// kept between them (``GzipWorkspace``): allocating a compressor clears its hash tables, and output
    /// written into a kept buffer touches no new pages.
    final class Workspace {
        let level: Int32
        let compressor: OpaquePointer
        private let free: FreeCompressor
        private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

        init(level: Int32, compressor: OpaquePointer, free: FreeCompressor) {
            self.level = level
            self.compressor = compressor
            self.free = free
        }

        /// The kept buffer, grown to at least `count` bytes.
        func scratch(holding count: Int) -> UnsafeMutableRawBufferPointer {
            if scratch.count < count {
                scratch.deallocate()
                scratch = .allocate(byteCount: count, alignment: 16)
            }
            return scratch
        }

        deinit {
            free(compressor)
            scratch.deallocate()
        }
    }

    /// Output larger than this is written into a buffer of its own, freed after.
    private static let largestKeptScratch = 4 << 20

    private func makeWorkspace(level: Int32) throws(Gzip.Failure) -> Workspace {
        guard let compressor = allocateCompressor(level) else {
            throw Gzip.Failure(code: -4, operation: "libdeflate_alloc_compressor")
        }
        return Workspace(level: level, compressor: compressor, free: freeCompressor)
    }
}

/// The memory a gzip compression works in (libdeflate's compressor, its hash tables, the buffer it
/// writes into), kept from one compression to the next by the one loop that owns it: the spool
/// worker's, each shipper's. Allocating a compressor clears its tables, about as costly as compressing
/// a small batch; a kept one is reused. No lock: it is its owner's, used by one compression at a time.
///
/// ```swift
/// let workspace = GzipWorkspace()   // one per loop that compresses
/// var body: [UInt8] = []
/// try Gzip.compress(lines, level: 1, into: &body, keeping: workspace)
/// ```
@_spi(Benchmarking) public final class GzipWorkspace: @unchecked Sendable {
    /// libdeflate's workspace, made at the first compression (and again when the level changes).
    fileprivate var libdeflate: Libdeflate.Workspace?

    public init() {}
}
