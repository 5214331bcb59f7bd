/// A first-in first-out queue with O(1) append and removal at the front; popped slots are
/// cleared at once so nothing they hold (completion closures) outlives its turn.
struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        storage[head] = nil
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= 4096)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Lets `body` change every element, front to back.
    mutating func updateEach(_ body: (inout Element) -> Void) {
        for index in head..<storage.count {
            body(&storage[index]!)
        }
    }

    /// Removes and returns everything.
    mutating func removeAll() -> [Element] {
        let elements = storage[head...].map { $0! }
        storage.removeAll()
        head = 0
        return elements
    }
}
