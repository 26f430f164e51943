#ifndef APIHEALTH_PREFETCH_H
#define APIHEALTH_PREFETCH_H

/// Asks the processor to bring the cache line holding `address` close, for writing: it goes on at
/// once, and a later access finds the line loaded instead of waiting for memory.
static inline void apihealth_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
