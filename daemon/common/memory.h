// Giving freed heap memory back to the kernel.
//
// glibc keeps what a large request freed (a 63 MiB input parsed, copied into a sandbox,
// stored) in its arenas whenever a small live allocation sits above it, so the daemon's RSS
// stayed about 40 MiB above idle after each large run until, by chance, the allocation
// above went too. Trimming after large work returns it (measured in BENCHMARKS.md).
//
//   if (bytes_handled >= kTrimAfterBytes) ReleaseFreeMemory();
//
// Thread safe.
#ifndef SANDGATE_COMMON_MEMORY_H_
#define SANDGATE_COMMON_MEMORY_H_

#include <cstdint>

namespace sandgate {

// Work that moved at least this much data through the heap is worth a trim (a trim walks
// every arena under its lock: not for every small run).
constexpr uint64_t kTrimAfterBytes = 4ull << 20;

// Returns the free pages of every malloc arena to the kernel. A no-op off glibc.
void ReleaseFreeMemory();

}  // namespace sandgate

#endif  // SANDGATE_COMMON_MEMORY_H_
