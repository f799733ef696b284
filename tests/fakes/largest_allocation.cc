#include "tests/fakes/largest_allocation.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> watching{false};
std::atomic<size_t> largest{0};
std::atomic<size_t> total{0};

void* Allocate(size_t n) {
  if (watching.load(std::memory_order_relaxed)) {
    total.fetch_add(n, std::memory_order_relaxed);
    size_t seen = largest.load(std::memory_order_relaxed);
    while (n > seen && !largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace sandgate::testing {

LargestAllocation::LargestAllocation() {
  largest.store(0);
  total.store(0);
  watching.store(true);
}
LargestAllocation::~LargestAllocation() { watching.store(false); }
size_t LargestAllocation::bytes() const { return largest.load(); }
size_t LargestAllocation::total_bytes() const { return total.load(); }

}  // namespace sandgate::testing
