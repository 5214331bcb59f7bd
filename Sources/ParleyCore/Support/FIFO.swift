/// A first-in first-out queue with O(1) append and removal at the front; popped slots are
/// cleared at once so nothing they hold (completion closures) outlives its turn. The head
/// moves by an index and the storage is compacted only once half of it is popped
/// (`Array.removeFirst` per element moves the whole queue each time). Used by the broker's
/// room queues, the Redis connection's command queues, the file workers' job queue and the
/// REST rate limiter's pruning order.
public struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    public init() {}

    public var count: Int { storage.count - head }
    public var isEmpty: Bool { head == storage.count }
    public var first: Element? { isEmpty ? nil : storage[head] }

    public mutating func append(_ element: Element) {
        storage.append(element)
    }

    @discardableResult
    public mutating func popFirst() -> Element? {
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
    public mutating func updateEach(_ body: (inout Element) -> Void) {
        for index in head..<storage.count {
            body(&storage[index]!)
        }
    }

    /// Lets `body` change the first element (front to back) that `predicate` accepts.
    public mutating func updateFirst(where predicate: (Element) -> Bool, _ body: (inout Element) -> Void) {
        for index in head..<storage.count where predicate(storage[index]!) {
            body(&storage[index]!)
            return
        }
    }

    /// Removes the elements `shouldRemove` accepts, keeping the others in order.
    public mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        storage.removeSubrange(0..<head)
        head = 0
        storage.removeAll { shouldRemove($0!) }
    }

    /// Removes and returns everything.
    @discardableResult
    public mutating func removeAll() -> [Element] {
        let elements = storage[head...].map { $0! }
        storage.removeAll()
        head = 0
        return elements
    }
}
