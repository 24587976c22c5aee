/// A `Bool` that any thread may read and set: what `Synchronization.Atomic<Bool>` gave the library
/// before its floor came down to iOS 16 / macOS 13 (`Atomic` needs iOS 18 / macOS 15).
///
/// It sits on `Lock`, not on processor atomics: Swift has no atomics below iOS 18 without a C
/// module, and the library's flags are read in loops that wait on `poll` or a semaphore anyway, so
/// an uncontended lock (tens of nanoseconds) costs nothing that shows. Every access is sequentially
/// consistent, which is at least what each former use asked for (`relaxed`, `acquiring`, `releasing`).
struct AtomicBool: Sendable {
    private let value: Lock<Bool>

    /// A flag holding `initial`.
    init(_ initial: Bool) {
        value = Lock(initial)
    }

    /// The value now.
    func load() -> Bool {
        value.withLock { $0 }
    }

    /// Sets the value; a thread that `load`s afterwards sees it, and everything written before it.
    func store(_ newValue: Bool) {
        value.withLock { $0 = newValue }
    }
}
