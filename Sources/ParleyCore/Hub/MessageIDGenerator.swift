import Synchronization

/// Message ids: a random per-process prefix and a counter, e.g. `k7f3q9x2-21z`. Unique across
/// restarts without coordination.
final class MessageIDGenerator: Sendable {
    private let prefix: String
    private let counter = Atomic<Int>(0)

    init() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        prefix = String((0..<8).map { _ in alphabet[Int(generator.next() % 36)] })
    }

    func next() -> String {
        Self.id(prefix: prefix, counter: counter.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    /// The counter in base 36 behind one base-36 digit saying how many digits follow, so a
    /// process's ids sort in the order they were made (`…-19`, `…-1z`, `…-210`): the store's
    /// index of ids grows at one end instead of taking each id at a random place.
    static func id(prefix: String, counter: Int) -> String {
        let digits = String(counter, radix: 36)
        return prefix + "-" + String(digits.utf8.count, radix: 36) + digits
    }
}
