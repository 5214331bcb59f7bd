import Foundation
import Synchronization

// The metric kinds `/metrics` is made of. Recording is a relaxed atomic operation; nothing is
// formatted or summed until somebody scrapes, so an unscraped server pays for the counting
// only. On the fan-out path, counters are per loop (``LoopMetrics``) and written by their
// loop alone.

/// A number that only goes up.
final class MetricCounter: Sendable {
    private let value = Atomic<Int>(0)

    @inline(__always) func increment(by amount: Int = 1) { value.add(amount, ordering: .relaxed) }

    /// For a counter only one thread writes (its loop): a plain load and store, no
    /// read-modify-write, so the loop pays nothing a plain integer would not.
    @inline(__always) func incrementFromOwner(by amount: Int = 1) {
        value.store(value.load(ordering: .relaxed) &+ amount, ordering: .relaxed)
    }

    var count: Int { value.load(ordering: .relaxed) }
}

/// A number that goes up and down.
final class MetricGauge: Sendable {
    private let value = Atomic<Int>(0)
    @inline(__always) func add(_ amount: Int) { value.add(amount, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

/// One counter per value of a fixed label set (doors, reasons).
struct CounterFamily<Label: Hashable & CaseIterable & Sendable>: Sendable where Label.AllCases: RandomAccessCollection {
    private let counters: [MetricCounter]
    private let labels: [Label]

    init() {
        labels = Array(Label.allCases)
        counters = labels.map { _ in MetricCounter() }
    }

    @inline(__always) func counter(_ label: Label) -> MetricCounter {
        counters[labels.firstIndex(of: label)!]
    }

    var all: [(Label, Int)] { zip(labels, counters.map(\.count)).map { ($0, $1) } }
}

/// Observations counted into fixed buckets (upper bounds, in microseconds), with their sum.
final class MetricHistogram: Sendable {
    /// Upper bounds in microseconds, ascending; one more bucket (+Inf) follows.
    let boundsMicros: [Int]
    private let buckets: [MetricCounter]
    private let sumMicros = MetricCounter()

    init(boundsMicros: [Int]) {
        precondition(boundsMicros == boundsMicros.sorted(), "histogram bounds must ascend")
        self.boundsMicros = boundsMicros
        buckets = (0...boundsMicros.count).map { _ in MetricCounter() }
    }

    /// Records one observation from any thread.
    func observe(micros: Int) {
        buckets[bucket(for: micros)].increment()
        sumMicros.increment(by: max(0, micros))
    }

    /// Records one observation from the only thread that writes this histogram.
    @inline(__always) func observeFromOwner(micros: Int) {
        buckets[bucket(for: micros)].incrementFromOwner()
        sumMicros.incrementFromOwner(by: max(0, micros))
    }

    @inline(__always) private func bucket(for micros: Int) -> Int {
        var index = 0
        while index < boundsMicros.count && micros > boundsMicros[index] { index += 1 }
        return index
    }

    /// Per-bucket counts (not cumulative; the last is +Inf), and the sum.
    var snapshot: (counts: [Int], sumMicros: Int) { (buckets.map(\.count), sumMicros.count) }

    /// Latency buckets from 0.5 ms to 10 s.
    static let latencyBoundsMicros = [500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
                                      1_000_000, 2_500_000, 5_000_000, 10_000_000]
}

/// Several histograms of the same buckets added up (one per loop), as one.
struct HistogramSum {
    var counts: [Int]
    var sumMicros = 0

    init(bounds: Int) { counts = Array(repeating: 0, count: bounds + 1) }

    mutating func add(_ histogram: MetricHistogram) {
        let (counts, sum) = histogram.snapshot
        for index in counts.indices { self.counts[index] += counts[index] }
        sumMicros += sum
    }
}

/// The Prometheus text exposition format (version 0.0.4), written family by family.
///
/// ```
/// # HELP parley_connections Connections open now, by door.
/// # TYPE parley_connections gauge
/// parley_connections{door="native"} 12
/// ```
public struct PrometheusText: Sendable {
    public private(set) var text = ""

    public init() {}

    /// Starts a metric family: its help line and type (`counter`, `gauge`, `histogram`).
    public mutating func family(_ name: String, _ type: String, help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// One sample; `labels` in the order given.
    public mutating func sample(_ name: String, _ value: Double, labels: KeyValuePairs<String, String> = [:]) {
        write(name, labels.map { ($0.key, $0.value) }, value)
    }

    public mutating func sample(_ name: String, _ value: Int, labels: KeyValuePairs<String, String> = [:]) {
        write(name, labels.map { ($0.key, $0.value) }, Double(value))
    }

    /// A family of one unlabelled sample, written only when the value is known (process
    /// figures this platform may not give).
    mutating func single(_ name: String, _ type: String, help: String, _ value: Double?) {
        guard let value else { return }
        family(name, type, help: help)
        sample(name, value)
    }

    mutating func write(_ name: String, _ labels: [(String, String)], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.format(value) + "\n"
    }

    /// A histogram's `_bucket` (cumulative), `_sum` (seconds) and `_count` lines.
    mutating func histogram(_ name: String, boundsMicros: [Int], counts: [Int], sumMicros: Int,
                            labels: [(String, String)] = []) {
        var cumulative = 0
        for (index, count) in counts.enumerated() {
            cumulative += count
            let bound = index < boundsMicros.count ? Self.format(Double(boundsMicros[index]) / 1_000_000) : "+Inf"
            write(name + "_bucket", labels + [("le", bound)], Double(cumulative))
        }
        write(name + "_sum", labels, Double(sumMicros) / 1_000_000)
        write(name + "_count", labels, Double(cumulative))
    }

    /// Whole numbers without a fraction, others as shortest decimal.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// Label values escape `\`, `"` and newlines.
    static func escape(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        return value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
