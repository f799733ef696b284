// Clock: the only source of time in sandgate, and the only way code waits for time to
// pass, so tests advance time instead of sleeping.
//
// Every timing rule (a reaper, an idle or lifetime clock, a watchdog, a retry delay) waits
// through its Clock, never absl::SleepFor or Mutex::AwaitWithTimeout directly:
//
//   absl::MutexLock lock(&mu_);
//   while (!stop_) {
//     clock_->AwaitWithDeadline(mu_, absl::Condition(&stop_), clock_->Now() + kPeriod);
//     ReapDue(clock_->Now());
//   }
//
// With the real clock this is Mutex::AwaitWithDeadline. With tests/fakes/fake_clock.h the
// wait ends when the test advances time past the deadline (or the condition holds), and the
// test can wait until every waiter has seen the new time (FakeClock::BlockUntilSettled).
//
// Thread safe (both implementations).
#ifndef SANDGATE_COMMON_CLOCK_H_
#define SANDGATE_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sandgate {

class CancelToken;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // Waits, with `mu` held on entry and on return, until `cond` holds or Now() >= deadline.
  // Returns cond's value at return. `mu` is released while waiting, as Mutex::Await does.
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                 absl::Time deadline) = 0;

  // As AwaitWithDeadline, for `timeout` of elapsed time however this clock is set meanwhile:
  // a step of the wall clock (NTP, an operator) neither stretches nor cuts the wait. The real
  // clock measures it on CLOCK_MONOTONIC, looking at `cond` every kAwaitForSlice (a timed
  // wait of abseil's is a CLOCK_REALTIME deadline, which a backward step stretches by the
  // step); for timers that must fire on time whatever the wall clock does (a lease's renewal).
  virtual bool AwaitFor(absl::Mutex& mu, const absl::Condition& cond, absl::Duration timeout) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }
  static constexpr absl::Duration kAwaitForSlice = absl::Milliseconds(50);

  // Sleeps until Now() >= deadline, or until `cancel` (may be null) is cancelled. Returns
  // true when cancelled.
  virtual bool SleepUntil(absl::Time deadline, const CancelToken* cancel = nullptr) = 0;
  bool SleepFor(absl::Duration d, const CancelToken* cancel = nullptr) {
    return SleepUntil(Now() + d, cancel);
  }

  // The process-wide real clock; never null, never destroyed.
  static Clock* Real();
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_CLOCK_H_
