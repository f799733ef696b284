// FakeClock: time that moves only when a test advances it. Thread safe.
#ifndef SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_
#define SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace sandgate::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1800000000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_
