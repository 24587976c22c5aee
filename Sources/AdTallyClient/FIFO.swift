/// A first-in first-out queue with O(1) amortised append and removal at the front: the tracker's
/// queue takes from its head on every batch, and `Array.removeFirst` would make that O(n).
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    init() {}

    init(_ elements: some Sequence<Element>) { storage = Array(elements) }

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }

    /// The elements, oldest first.
    var elements: ArraySlice<Element> { storage[head...] }

    mutating func append(_ element: Element) { storage.append(element) }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Puts elements back at the front, in the given order (a failed journal write returns its events).
    mutating func prepend(_ elements: [Element]) {
        storage.replaceSubrange(head..<head, with: elements)
    }
}

extension FIFO: Sendable where Element: Sendable {}
