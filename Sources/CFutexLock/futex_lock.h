#ifndef APIHEALTH_FUTEX_LOCK_H
#define APIHEALTH_FUTEX_LOCK_H

#if defined(__linux__)
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/// A lock in one 32-bit word, on Linux's futex: 0 free, 1 held, 2 held and someone may be waiting
/// (Ulrich Drepper, "Futexes Are Tricky", mutex 3). The word changes hands only through the atomic
/// operations here; the kernel is asked only to sleep on it and to wake a sleeper. Taking and
/// releasing it uncontended is one atomic operation each, where `pthread_mutex_lock` and
/// `pthread_mutex_unlock` check the mutex's kind and record its owner.

/// Sleeps until the lock is free and takes it, marking it contended.
static inline void apihealth_futex_lock_contended(uint32_t *word) {
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

/// Takes the lock, sleeping while another thread holds it.
static inline void apihealth_futex_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (__builtin_expect(
            __atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 1)) {
        return;
    }
    apihealth_futex_lock_contended(word);
}

/// Takes the lock if it is free; 0 without waiting if another thread holds it.
static inline int apihealth_futex_trylock(uint32_t *word) {
    uint32_t expected = 0;
    return __atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/// Releases the lock, waking one sleeper if it was contended.
static inline void apihealth_futex_unlock(uint32_t *word) {
    if (__builtin_expect(__atomic_fetch_sub(word, 1, __ATOMIC_RELEASE) != 1, 0)) {
        __atomic_store_n(word, 0, __ATOMIC_RELEASE);
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}
#endif

#endif
