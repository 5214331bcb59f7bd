import Synchronization

/// Message ids: a random per-process prefix and a counter, e.g. `k7f3q9x2-1z`. Unique across
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
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return prefix + "-" + String(n, radix: 36)
    }
}
