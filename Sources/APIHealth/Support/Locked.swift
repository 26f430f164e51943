#if canImport(Darwin)
import Darwin
#elseif os(Linux)
import CFutexLock
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif

/// The package's one lock: a value that is only read or changed while holding it.
///
/// ```swift
/// /// Guards the number of requests seen.
/// let requests = Locked<UInt64>(0)
/// requests.withLock { $0 += 1 }
/// ```
///
/// Available on every platform `Package.swift` declares (`Synchronization.Mutex` and `Atomic` need
/// macOS 15 / iOS 18), and shared by every target of the package. It is `public` under the `Package` SPI
/// (`@_spi(Package) import APIHealth`) rather than `package`: this compiler inlines an `@inlinable` function
/// into another module only when it is public, and a `package` one is called unspecialized there, its
/// generic closure and state resolved at run time on every lock taken. A lock
/// around code rather than a value is a `Locked<Void>`; a counter is a `Locked<UInt64>`.
///
/// The lock is `os_unfair_lock` on Apple platforms, a word on Linux's futex (`futex_lock.h`: taken and
/// released uncontended by one atomic operation each, about a fifth of what `pthread_mutex_lock` and
/// `pthread_mutex_unlock` take), a `pthread_mutex_t` elsewhere, called directly: `NSLock` would add an
/// object and a dynamic call to every lock taken, and the record path takes a few per request.
///
/// `@unchecked Sendable` because the lock, not the type system, serialises every access to `state`.
@_spi(Package) public final class Locked<State>: @unchecked Sendable {
    @usableFromInline let lock = PlatformLock()
    /// Exclusive access is the lock's to enforce: the runtime's own check would only repeat it on
    /// every access.
    @usableFromInline @exclusivity(unchecked) var state: State

    public init(_ state: State) {
        self.state = state
    }

    deinit {
        lock.destroy()
    }

    /// Runs `body` with the state, holding the lock; never call back into the same lock from `body`.
    @inlinable @inline(__always)
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }

    /// Runs `body` if the lock is free now; `nil` without waiting if another thread holds it.
    @inline(__always)
    func withLockIfAvailable<Result>(_ body: (inout State) throws -> Result) rethrows -> Result? {
        guard lock.try() else { return nil }
        defer { lock.unlock() }
        return try body(&state)
    }
}

@_spi(Package) extension Locked where State == Void {
    /// A lock around code rather than a value.
    public convenience init() {
        self.init(())
    }

    /// Runs `body` holding the lock.
    @inlinable @inline(__always)
    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Takes the lock, for code that holds it across steps that throw typed errors (pair it with
    /// ``unlock()`` in a `defer`).
    @inline(__always)
    func acquire() { lock.lock() }

    /// Lets go of the lock taken with ``acquire()``.
    @inline(__always)
    func release() { lock.unlock() }
}

/// A platform lock at a fixed address, allocated once and never moved (a lock must not be copied).
@usableFromInline
struct PlatformLock {
    #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock
    #elseif os(Linux)
    @usableFromInline typealias Primitive = UInt32
    #else
    @usableFromInline typealias Primitive = pthread_mutex_t
    #endif

    @usableFromInline let primitive: UnsafeMutablePointer<Primitive>

    init() {
        primitive = .allocate(capacity: 1)
        #if canImport(Darwin)
        primitive.initialize(to: os_unfair_lock())
        #elseif os(Linux)
        primitive.initialize(to: 0)
        #else
        primitive.initialize(to: pthread_mutex_t())
        let created = pthread_mutex_init(primitive, nil)
        precondition(created == 0, "pthread_mutex_init failed: \(created)")
        #endif
    }

    /// Frees the lock; it must not be held.
    func destroy() {
        #if !canImport(Darwin) && !os(Linux)
        pthread_mutex_destroy(primitive)
        #endif
        primitive.deinitialize(count: 1)
        primitive.deallocate()
    }

    @inlinable @inline(__always)
    func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #elseif os(Linux)
        apihealth_futex_lock(primitive)
        #else
        let locked = pthread_mutex_lock(primitive)
        assert(locked == 0, "pthread_mutex_lock failed: \(locked)")
        #endif
    }

    @inlinable @inline(__always)
    func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #elseif os(Linux)
        apihealth_futex_unlock(primitive)
        #else
        let unlocked = pthread_mutex_unlock(primitive)
        assert(unlocked == 0, "pthread_mutex_unlock failed: \(unlocked)")
        #endif
    }

    /// Takes the lock if it is free; `false` without waiting if another thread holds it.
    @inline(__always)
    func `try`() -> Bool {
        #if canImport(Darwin)
        os_unfair_lock_trylock(primitive)
        #elseif os(Linux)
        apihealth_futex_trylock(primitive) != 0
        #else
        pthread_mutex_trylock(primitive) == 0
        #endif
    }
}
