// LargestAllocation: the largest single C++ heap allocation (operator new) made, by any
// thread, while one is alive, and the sum of them all. For tests that prove a path streams through
// bounded buffers instead of holding a whole file or message.
//
//   LargestAllocation probe;
//   ASSERT_TRUE(store->PutRunRequest("r1", request_with_64_mib_input).ok());
//   EXPECT_LT(probe.bytes(), 1 << 20);
//
// Linking largest_allocation.cc (not part of sandgate_fakes: a test binary links it on
// purpose) replaces the test binary's global operator new and delete
// (they still use malloc and free). Only one probe may be alive at a time; not otherwise
// thread safe.
#ifndef SANDGATE_TESTS_FAKES_LARGEST_ALLOCATION_H_
#define SANDGATE_TESTS_FAKES_LARGEST_ALLOCATION_H_

#include <cstddef>

namespace sandgate::testing {

class LargestAllocation {
 public:
  LargestAllocation();
  ~LargestAllocation();
  LargestAllocation(const LargestAllocation&) = delete;
  LargestAllocation& operator=(const LargestAllocation&) = delete;
  size_t bytes() const;
  // All bytes allocated while it is alive (freed or not).
  size_t total_bytes() const;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_LARGEST_ALLOCATION_H_
