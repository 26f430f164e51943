/// Why the relay refused a line or a whole write: the reasons its answers give and its health point counts
/// (`refused_<reason>`). The raw values are ``PointSchema/RelayField/lineRefusalReasons`` and
/// ``PointSchema/RelayField/writeRefusalReasons``, in order (a test checks it).
package enum Refusal: String, Sendable, CaseIterable, Hashable {
    // A line's reasons: it is named in the 400's list, the other lines are taken.
    /// Not valid line protocol.
    case unparsable
    /// A measurement the agent never writes.
    case measurement
    /// A tag key the schema does not have for the measurement (nor the relay's extra tags).
    case tag
    /// A tag value too long, or too many tags.
    case tagValue = "tag_value"
    /// No `service` tag, or another app's than the key's.
    case service
    /// A `country` tag that is not an ISO 3166-1 alpha-2 code.
    case place
    /// An `app_version` tag that is not a version.
    case version
    /// A field key the schema does not have for the measurement, or too many fields.
    case field
    /// A field value of another type than the schema's.
    case fieldType = "field_type"
    /// A timestamp outside the window around the relay's clock.
    case timestamp
    /// A series the key may not start: past its new series for the hour.
    case seriesLimit = "series_limit"

    // A write's reasons: the whole body is refused.
    /// No key, or one the relay does not know (401).
    case key
    /// A body over the size limit, as received or after gzip (413).
    case bodyTooLarge = "body_too_large"
    /// A body that is not gzip although it says so (400).
    case body
    /// Over the client's or the key's lines per minute (429).
    case throttled

    /// The refusals of single lines.
    package static let lineReasons: [Refusal] = [
        .unparsable, .measurement, .tag, .tagValue, .service, .place, .version, .field, .fieldType, .timestamp,
        .seriesLimit,
    ]
}
