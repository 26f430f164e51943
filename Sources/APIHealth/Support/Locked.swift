#if canImport(Darwin)
import Darwin
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
/// The lock is the platform's own, as swift-nio's `NIOLock` takes it: `os_unfair_lock` on Apple platforms,
/// a `pthread_mutex_t` elsewhere, called directly: `NSLock` would add an object and a dynamic call to every
/// lock taken, and the record path takes a few per request. (`NIOLockedValueBox` is this type, but the core
/// library does not depend on swift-nio: an app that links it would build swift-nio for one lock.)
///
/// One allocation holds both the state and the lock (a `ManagedBuffer`: the state its header, the lock
/// its one element), as `NIOLockedValueBox` does: the lock never moves, and a `Locked` costs one
/// allocation where a class holding the state and a separately allocated lock cost two.
///
/// `@unchecked Sendable` because the lock, not the type system, serialises every access to the state.
@_spi(Package) public struct Locked<State>: @unchecked Sendable {
    @usableFromInline let storage: LockedStorage<State>

    @inlinable
    public init(_ state: State) {
        storage = LockedStorage.make(state)
    }

    /// Runs `body` with the state, holding the lock; never call back into the same lock from `body`.
    @inlinable @inline(__always)
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        let lock = storage.lock
        PlatformLock.lock(lock)
        defer { PlatformLock.unlock(lock) }
        return try body(&storage.state.pointee)
    }

    /// Runs `body` if the lock is free now; `nil` without waiting if another thread holds it.
    @inline(__always)
    func withLockIfAvailable<Result>(_ body: (inout State) throws -> Result) rethrows -> Result? {
        let lock = storage.lock
        guard PlatformLock.try(lock) else { return nil }
        defer { PlatformLock.unlock(lock) }
        return try body(&storage.state.pointee)
    }
}

@_spi(Package) extension Locked where State == Void {
    /// A lock around code rather than a value.
    @inlinable
    public init() {
        self.init(())
    }

    /// Runs `body` holding the lock.
    @inlinable @inline(__always)
    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        let lock = storage.lock
        PlatformLock.lock(lock)
        defer { PlatformLock.unlock(lock) }
        return try body()
    }

    /// Takes the lock, for code that holds it across steps that throw typed errors (pair it with
    /// ``release()`` in a `defer`).
    @inline(__always)
    func acquire() { PlatformLock.lock(storage.lock) }

    /// Lets go of the lock taken with ``acquire()``.
    @inline(__always)
    func release() { PlatformLock.unlock(storage.lock) }
}

/// The state (the header) and the lock (the one element) of a ``Locked``, in one allocation.
@usableFromInline
final class LockedStorage<State>: ManagedBuffer<State, PlatformLock.Primitive> {
    @inlinable
    static func make(_ state: State) -> LockedStorage {
        let buffer = create(minimumCapacity: 1) { _ in state }
        let storage = unsafeDowncast(buffer, to: LockedStorage.self)
        storage.withUnsafeMutablePointerToElements { PlatformLock.initialize($0) }
        return storage
    }

    /// The state: the buffer's header, reached through its address (`header` is a stored property the
    /// runtime would check for exclusive access on every use: the lock already ensures it).
    @inlinable
    var state: UnsafeMutablePointer<State> {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0 } }
    }

    /// The lock: the buffer's one element, where it lies for the buffer's life (the `Locked` holding
    /// the buffer keeps it alive while the lock is used).
    @inlinable
    var lock: UnsafeMutablePointer<PlatformLock.Primitive> {
        @inline(__always) get { withUnsafeMutablePointerToElements { $0 } }
    }

    deinit {
        withUnsafeMutablePointerToElements { PlatformLock.destroy($0) }
    }
}

/// The platform's lock, operated on where it lies (a lock must not be copied or moved).
@usableFromInline
enum PlatformLock {
    #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock
    #else
    @usableFromInline typealias Primitive = pthread_mutex_t
    #endif

    @usableFromInline
    static func initialize(_ primitive: UnsafeMutablePointer<Primitive>) {
        #if canImport(Darwin)
        primitive.initialize(to: os_unfair_lock())
        #else
        primitive.initialize(to: pthread_mutex_t())
        let created = pthread_mutex_init(primitive, nil)
        precondition(created == 0, "pthread_mutex_init failed: \(created)")
        #endif
    }

    /// Ends the lock; it must not be held.
    static func destroy(_ primitive: UnsafeMutablePointer<Primitive>) {
        #if !canImport(Darwin)
        pthread_mutex_destroy(primitive)
        #endif
        primitive.deinitialize(count: 1)
    }

    @inlinable @inline(__always)
    static func lock(_ primitive: UnsafeMutablePointer<Primitive>) {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #else
        let locked = pthread_mutex_lock(primitive)
        assert(locked == 0, "pthread_mutex_lock failed: \(locked)")
        #endif
    }

    @inlinable @inline(__always)
    static func unlock(_ primitive: UnsafeMutablePointer<Primitive>) {
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #else
        let unlocked = pthread_mutex_unlock(primitive)
        assert(unlocked == 0, "pthread_mutex_unlock failed: \(unlocked)")
        #endif
    }

    /// Takes the lock if it is free; `false` without waiting if another thread holds it.
    @inline(__always)
    static func `try`(_ primitive: UnsafeMutablePointer<Primitive>) -> Bool {
        #if canImport(Darwin)
        os_unfair_lock_trylock(primitive)
        #else
        pthread_mutex_trylock(primitive) == 0
        #endif
    }
}
