import APIHealth

/// The names of the tag, fields and measurement the metrics factory writes, beside each handler's
/// own label and dimensions. Dashboards depend on them; the dashboard contract test reads them from here.
///
/// ```swift
/// MetricsSchema.Field.p99                // "p99"
/// MetricsSchema.MetricType.timer         // "timer", the value of the `metric_type` tag
/// ```
public enum MetricsSchema {
    /// Tag keys.
    public enum Tag {
        /// What kind of handler wrote the series (one of ``MetricsSchema/MetricType``). A dimension with
        /// this key is left out, so the tag always says what the fields mean.
        public static let metricType = "metric_type"
    }

    /// Values of the `metric_type` tag.
    public enum MetricType {
        /// A `Counter`.
        public static let counter = "counter"
        /// A `FloatingPointCounter`.
        public static let floatingPointCounter = "floating_counter"
        /// A `Meter`.
        public static let meter = "meter"
        /// A `Recorder` made with `aggregate: false` (swift-metrics' `Gauge`).
        public static let gauge = "gauge"
        /// A `Recorder` made with `aggregate: true`.
        public static let recorder = "recorder"
        /// A `Timer`, its values in milliseconds.
        public static let timer = "timer"
    }

    /// Field keys.
    public enum Field {
        /// Counter: cumulative count since start (unsigned). Timer and recorder: values in the interval.
        public static let count = "count"
        /// Floating-point counter: cumulative total. Meter and gauge: the last value.
        public static let value = "value"
        /// Timer and recorder: the sum of the interval's values.
        public static let sum = "sum"
        /// Timer and recorder: the interval's smallest value.
        public static let min = "min"
        /// Timer and recorder: the interval's largest value.
        public static let max = "max"
        /// Timer and recorder: the interval's mean.
        public static let mean = "mean"
        /// Timer and recorder, with ``APIHealthMetricsFactory/Configuration/writesQuantiles``: this replica's
        /// median of the interval.
        public static let p50 = "p50"
        /// As ``p50``, the 90th percentile.
        public static let p90 = "p90"
        /// As ``p50``, the 95th percentile.
        public static let p95 = "p95"
        /// As ``p50``, the 99th percentile.
        public static let p99 = "p99"
        /// Timer and recorder: the histogram bucket above every bound (every value of the interval).
        public static let bucketInfinity = "le_inf"
        /// Timer and recorder: the histogram bucket of the values at or below `bound` (milliseconds for a
        /// timer), cumulative over the bounds as Prometheus' `le` buckets: `le_300`, `le_2.5`.
        ///
        /// - Parameter bound: The bucket's upper bound.
        /// - Returns: The field's name.
        public static func bucket(_ bound: Double) -> String { PointSchema.IntervalField.bucket(milliseconds: bound) }
    }

    /// The label (after the prefix) of the shared series that handlers made past the cardinality cap write to.
    public static let overflowLabel = "apihealth_metrics_overflow"

    /// The tag keys the factory adds to each handler's dimensions.
    public static let tags = [Tag.metricType]
    /// The field keys the factory writes (beside the histogram buckets).
    public static let fields = [
        Field.count, Field.value, Field.sum, Field.min, Field.max, Field.mean, Field.p50, Field.p90, Field.p95,
        Field.p99,
    ]
}
