#include "common/clock.h"

#include <poll.h>

#include <algorithm>
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
