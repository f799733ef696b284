#include "common/clock.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/time/clock.h"
#include "common/cancel.h"

namespace sandgate {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }

  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                         absl::Time deadline) override {
    return mu.AwaitWithDeadline(cond, deadline);
  }

  // `mu` is held on entry and on return, as the contract says; the analysis cannot see it.
  bool AwaitFor(absl::Mutex& mu, const absl::Condition& cond,
                absl::Duration timeout) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (timeout <= absl::ZeroDuration()) return cond.Eval();
    // Slices of a relative sleep (nanosleep counts CLOCK_MONOTONIC), `mu` released in each;
    // an infinite timeout waits a year at a time.
    const auto end = std::chrono::steady_clock::now() +
                     absl::ToChronoNanoseconds(std::min(timeout, absl::Hours(24 * 365)));
    while (!cond.Eval()) {
      const auto left = end - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return false;
      mu.Unlock();
      absl::SleepFor(std::min(absl::FromChrono(left), kAwaitForSlice));
      mu.Lock();
    }
    return true;
  }

  bool SleepUntil(absl::Time deadline, const CancelToken* cancel) override {
    if (cancel == nullptr) {
      absl::SleepFor(deadline - absl::Now());
      return false;
    }
    // poll() takes milliseconds; round up so a wait never ends before its deadline.
    while (!cancel->cancelled()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      struct pollfd p = {cancel->fd(), POLLIN, 0};
      const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
      poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    }
    return true;
  }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* clock = new RealClock();
  return clock;
}

}  // namespace sandgate
