#if canImport(os)
import os
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value that several threads share, read and changed only inside `withLock`.
///
/// The library's own lock rather than `Synchronization.Mutex`, because `Mutex` needs iOS 18 /
/// macOS 15 and the client's floor is iOS 16 / macOS 13 (docs/CLIENT.md): on Apple platforms it is
/// an `OSAllocatedUnfairLock` (iOS 16 / macOS 13, the floor itself), on Linux a `pthread_mutex_t`
/// allocated with the value in one block, so that a lock costs one allocation and no dynamic
/// exclusivity check. The API is `Mutex`'s (`withLock`, typed throws), so each use reads as before.
///
/// `Value` must be `Sendable`: the lock hands the value to whichever thread holds it, and unlike
/// `Mutex` (whose `sending` parameters let it hold anything) it cannot prove that safe otherwise.
/// Copies of a `Lock` share one lock and one value. The body must not call `withLock` on the same
/// lock again: neither lock is recursive (the unfair lock traps, the mutex would deadlock).
struct Lock<Value: Sendable>: @unchecked Sendable {
    // @unchecked: the value is only reached through `withLock`, under the lock, on both platforms.

    #if canImport(os)
    private let base: OSAllocatedUnfairLock<Value>

    /// A lock around `value`.
    init(_ value: Value) {
        base = OSAllocatedUnfairLock(initialState: value)
    }

    /// Runs `body` with the value while holding the lock, and returns what it returns; a `Failure`
    /// it throws is thrown after the lock is released.
    func withLock<Returned, Failure: Error>(_ body: (inout Value) throws(Failure) -> Returned) throws(Failure) -> Returned {
        // `withLockUnchecked` neither throws typed errors nor demands a Sendable body; the Result
        // carries the typed error out, and the value stays Sendable by the type's constraint.
        let outcome = base.withLockUnchecked { value -> Result<Returned, Failure> in
            do throws(Failure) {
                return .success(try body(&value))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }
    #else
    private let storage: Storage

    /// A lock around `value`.
    init(_ value: Value) {
        storage = Storage.make(value)
    }

    /// Runs `body` with the value while holding the lock, and returns what it returns; a `Failure`
    /// it throws is thrown after the lock is released.
    func withLock<Returned, Failure: Error>(_ body: (inout Value) throws(Failure) -> Returned) throws(Failure) -> Returned {
        try storage.withUnsafeMutablePointers { (value, mutex) throws(Failure) -> Returned in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    /// The value as the buffer's header and the mutex as its one element: one allocation, and the
    /// mutex at an address that never moves (a `pthread_mutex_t` must not be copied once in use).
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        static func make(_ value: Value) -> Storage {
            // `create` allocates an instance of the class it is called on, so the downcast holds.
            let storage = unsafeDowncast(create(minimumCapacity: 1) { _ in value }, to: Storage.self)
            storage.withUnsafeMutablePointerToElements { mutex in
                mutex.initialize(to: pthread_mutex_t())
                pthread_mutex_init(mutex, nil)
            }
            return storage
        }

        deinit {
            // The header (the value) is destroyed by ManagedBuffer; the element is ours to destroy.
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                mutex.deinitialize(count: 1)
            }
        }
    }
    #endif
}
