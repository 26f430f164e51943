@_spi(Package) import APIHealth
import Foundation
import LineProtocol

/// The schema check on a line's bytes where they are (``LineParser/scanLine(_:lineNumber:into:)``'s spans):
/// the same decisions as ``LineCheck/check(_:app:now:)`` without building a `Point`, and the line copied on as
/// written but where the relay changes it (the key's `env` tag, a value given as another numeric type than
/// the schema's, the timestamp in the agent's precision or the relay's own).
///
/// A line whose bytes readers could read differently (a backslash, a line break in a string), or that
/// needs what only the encoder does (a field named twice, a float in another form than plain digits, an
/// unsigned value past `Int64.max` for InfluxDB 1.x) is left to the careful path: parsed into a `Point`,
/// checked by ``LineCheck/check(_:app:now:)`` and encoded by the agent, as before.
///
/// ```swift
/// var spans = LineSpans()
/// guard try parser.scanLine(line, into: &spans) else { return }
/// switch check.check(line, spans: spans, precision: .ns, forwarding: forwarding, now: now, into: &out) {
/// case .forward(let series): …   // the line, ready to forward, is at the end of `out`
/// case .refused(let reason): …
/// case .careful: …                // parse it into a Point and check that
/// }
/// ```
extension LineCheck {
    /// What the relay writes into each line of one key's request.
    package struct Forwarding: Sendable {
        /// The `service` value every line must carry: the key's app.
        let service: [UInt8]
        /// `,env=<environment>` as written into each line (empty: no environment).
        let environmentTag: [UInt8]
        /// The precision lines are forwarded in: the agent's.
        let precision: Precision
        /// Whether the agent writes unsigned values as signed ones (InfluxDB 1.x).
        let writesUnsignedAsSigned: Bool

        package init(app: AppKeys.App, precision: Precision, writesUnsignedAsSigned: Bool) {
            service = Array(app.name.utf8)
            if app.environment.isEmpty {
                environmentTag = []
            } else {
                var tag = Array(",\(LineCheck.environmentTag)=".utf8)
                for byte in app.environment.utf8 {
                    if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "=") || byte == UInt8(ascii: " ") {
                        tag.append(UInt8(ascii: "\\"))
                    }
                    tag.append(byte)
                }
                environmentTag = tag
            }
            self.precision = precision
            self.writesUnsignedAsSigned = writesUnsignedAsSigned
        }
    }

    /// What the byte check decided.
    package enum Outcome: Sendable, Hashable {
        /// Taken: the line to forward is at the end of the buffer; `series` identifies its series (its
        /// measurement and tags as forwarded) for the key's series budget.
        case forward(series: UInt64)
        /// Refused, for the reason the careful path gives too.
        case refused(Refusal)
        /// Left to the careful path (nothing was written).
        case careful
    }

    /// How one field's value is forwarded.
    private enum ValueForm {
        case asWritten, withoutSuffix, asUnsigned, asSigned, careful, refused
    }

    /// Checks the line `line` (scanned into `spans`, its timestamps in `precision`) as sent with the key of
    /// `forwarding` at `now` (the relay's clock); when it is taken, appends the line to forward (`\n`
    /// included) to `out`.
    package func check(
        _ line: UnsafeBufferPointer<UInt8>,
        spans: LineSpans,
        precision: Precision,
        forwarding: Forwarding,
        now: Timestamp,
        into out: inout [UInt8]
    ) -> Outcome {
        if spans.hasEscapesOrLineBreaks { return .careful }
        @inline(__always) func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: line[range])
        }
        guard let schema = measurements[bytes: bytes(spans.measurement)] else { return .refused(.measurement) }
        if spans.tags.count > Self.maximumTags { return .refused(.tagValue) }
        var service = false
        var environment = -1
        for index in spans.tags.indices {
            let tag = spans.tags[index]
            guard let role = schema.tags[bytes: bytes(tag.key)] else { return .refused(.tag) }
            if tag.value.count > Self.maximumTagValueBytes { return .refused(.tagValue) }
            switch role {
            case .plain: break
            case .service:
                let value = bytes(tag.value)
                guard Self.equal(value, forwarding.service) else {
                    // `String` compares canonical forms: the careful path decides for any other than ASCII.
                    return isASCII(value) ? .refused(.service) : .careful
                }
                service = true
            case .country:
                guard isCountry(bytes: bytes(tag.value)) else { return .refused(.place) }
            case .appVersion:
                guard Self.isVersion(bytes: bytes(tag.value)) else { return .refused(.version) }
            case .environment:
                environment = index
            }
        }
        guard service else { return .refused(.service) }
        if spans.fields.count > Self.maximumFields { return .refused(.field) }
        var seen: UInt64 = 0
        var bucketsSeen: UInt64 = 0
        var rewrites = false
        for field in spans.fields {
            let key = bytes(field.key)
            let type: FieldType
            if let entry = schema.fields[bytes: key] {
                if seen & entry.bit != 0 { return .careful }
                seen |= entry.bit
                type = entry.type
            } else if schema.hasBuckets, Self.isBucket(bytes: key) {
                // A bucket named twice is left to the careful path: a bit per bucket's hash, and where two
                // bits collide, the bytes of the buckets before it compared.
                let bit: UInt64 = 1 << UInt64(truncatingIfNeeded: NameTable<Bool>.hash(key) & 63)
                if bucketsSeen & bit != 0 {
                    for earlier in spans.fields where earlier.key.lowerBound < field.key.lowerBound {
                        if bytes(earlier.key).elementsEqual(key) { return .careful }
                    }
                }
                bucketsSeen |= bit
                type = .int
            } else {
                return .refused(.field)
            }
            switch Self.form(of: bytes(field.value), kind: field.kind, as: type, forwarding) {
            case .asWritten: break
            case .refused: return .refused(.fieldType)
            case .careful: return .careful
            default: rewrites = true
            }
        }
        var timestamp = now
        if let value = spans.timestamp {
            let written = Timestamp(value, precision: precision)
            let offset = written.nanosecondsSinceEpoch.subtractingReportingOverflow(now.nanosecondsSinceEpoch)
                .partialValue
            if offset > maximumAheadNanoseconds || offset < -maximumAgeNanoseconds {
                guard restamps else { return .refused(.timestamp) }
            } else {
                timestamp = written
            }
        }
        // The encoder's refusal of a timestamp out of range: the careful path's to give.
        guard let stamp = timestamp.value(in: forwarding.precision) else { return .careful }

        // The measurement and tags as written, the install's `env` replaced by the key's.
        let start = out.count
        let seriesEnd = spans.seriesEnd
        var cut = seriesEnd
        var resume = seriesEnd
        if environment >= 0 {
            cut = spans.tags[environment].key.lowerBound - 1
            resume = spans.tags[environment].value.upperBound
        } else if !forwarding.environmentTag.isEmpty {
            // Before the first tag key after `env`, as sorted tags have it.
            for tag in spans.tags where Self.isAfterEnvironment(bytes(tag.key)) {
                cut = tag.key.lowerBound - 1
                resume = cut
                break
            }
        }
        out.appendCopy(of: bytes(0..<cut))
        forwarding.environmentTag.withUnsafeBufferPointer { out.appendCopy(of: $0) }
        out.appendCopy(of: bytes(resume..<seriesEnd))
        var hasher = Hasher()
        out.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[start...])) }
        let series = UInt64(bitPattern: Int64(hasher.finalize()))

        out.append(UInt8(ascii: " "))
        if !rewrites {
            out.appendCopy(
                of: bytes(spans.fields[0].key.lowerBound..<spans.fields[spans.fields.count - 1].value.upperBound)
            )
        } else {
            for (index, field) in spans.fields.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.appendCopy(of: bytes(field.key.lowerBound..<field.value.lowerBound))
                let value = bytes(field.value)
                let type = schema.fields[bytes: bytes(field.key)]?.type ?? .int
                switch Self.form(of: value, kind: field.kind, as: type, forwarding) {
                case .withoutSuffix:
                    out.appendCopy(of: UnsafeBufferPointer(rebasing: value.dropLast()))
                case .asUnsigned:
                    out.appendCopy(of: UnsafeBufferPointer(rebasing: value.dropLast()))
                    out.append(UInt8(ascii: "u"))
                case .asSigned:
                    out.appendCopy(of: UnsafeBufferPointer(rebasing: value.dropLast()))
                    out.append(UInt8(ascii: "i"))
                default:
                    out.appendCopy(of: value)
                }
            }
        }
        out.append(UInt8(ascii: " "))
        out.appendDecimal(stamp)
        out.append(UInt8(ascii: "\n"))
        return .forward(series: series)
    }

    /// How a value written as `kind` is forwarded as a field of `type`: as the careful path's
    /// ``coerce(_:to:)`` converts it, or left to that path where only it can tell.
    @inline(__always)
    private static func form(
        of value: UnsafeBufferPointer<UInt8>,
        kind: LineSpans.Kind,
        as type: FieldType,
        _ forwarding: Forwarding
    ) -> ValueForm {
        switch (type, kind) {
        case (.string, .string):
            return value.count - 2 <= LineEncoder.maximumStringBytes ? .asWritten : .careful
        case (.bool, .bool):
            return .asWritten
        case (.float, .float):
            return isPlainDecimal(value) ? .asWritten : .careful
        case (.float, .int), (.float, .uint):
            return .withoutSuffix
        case (.int, .int):
            return .asWritten
        case (.int, .uint):
            // Up to 18 digits is within `Int64`; longer ones the careful path measures.
            return value.count <= 19 ? .asSigned : .careful
        case (.uint, .uint):
            guard forwarding.writesUnsignedAsSigned else { return .asWritten }
            return value.count <= 19 ? .asSigned : .careful
        case (.uint, .int):
            // A minus sign: negative (refused) or `-0i` (taken): the careful path tells.
            if value[0] == UInt8(ascii: "-") { return .careful }
            return forwarding.writesUnsignedAsSigned ? .asWritten : .asUnsigned
        default:
            return .refused
        }
    }

    /// Whether `bytes` are `other`'s.
    @inline(__always)
    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ other: [UInt8]) -> Bool {
        bytes.count == other.count
            && other.withUnsafeBufferPointer { other in
                bytes.isEmpty || memcmp(bytes.baseAddress!, other.baseAddress!, bytes.count) == 0
            }
    }

    /// `-?[0-9]+(\.[0-9]+)?`: a float every reader reads alike.
    @inline(__always)
    private static func isPlainDecimal(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = value[0] == UInt8(ascii: "-") ? 1 : 0
        var digits = 0
        var dot = -1
        while index < value.count {
            let byte = value[index]
            if byte &- UInt8(ascii: "0") < 10 {
                digits += 1
            } else if byte == UInt8(ascii: "."), dot < 0, digits > 0 {
                dot = index
            } else {
                return false
            }
            index += 1
        }
        return digits > 0 && dot != value.count - 1
    }

    /// Whether a tag key sorts after `env` (byte order, as `String` orders UTF-8).
    @inline(__always)
    private static func isAfterEnvironment(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        let environment: (UInt8, UInt8, UInt8) = (UInt8(ascii: "e"), UInt8(ascii: "n"), UInt8(ascii: "v"))
        if key[0] != environment.0 { return key[0] > environment.0 }
        if key.count == 1 { return false }
        if key[1] != environment.1 { return key[1] > environment.1 }
        if key.count == 2 { return false }
        if key[2] != environment.2 { return key[2] > environment.2 }
        return key.count > 3
    }
}

/// Whether every byte is below 0x80.
@inline(__always)
private func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    bytes.allSatisfy { $0 < 0x80 }
}
