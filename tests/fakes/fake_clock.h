// FakeClock: time that moves only when a test advances it, and waits that end when it does.
//
// Code under test waits through Clock::AwaitWithDeadline / SleepUntil; a waiter whose deadline
// has passed (fake time) returns within a millisecond of real time after Advance(). To prove a
// timing rule both "not before" and "at", a test advances to just before the deadline, lets
// the component's timer threads settle, checks nothing happened, then advances to the deadline:
//
//   FakeClock clock;
//   SessionManager sessions(..., &clock);            // one reaper thread waits on `clock`
//   clock.Advance(idle_timeout - absl::Nanoseconds(1));
//   ASSERT_TRUE(clock.BlockUntilSettled(1));         // the reaper has run and waits again
//   EXPECT_EQ(sessions.Get(id)->status(), SESSION_ACTIVE);
//   clock.Advance(absl::Nanoseconds(1));
//   ASSERT_TRUE(clock.BlockUntilSettled(1));
//   EXPECT_EQ(sessions.Get(id)->status(), SESSION_EXPIRED);
//
// Thread safe. Lock order: a waiter's own mutex, then the clock's; the clock never takes a
// waiter's mutex, so it cannot deadlock with the code it drives.
#ifndef SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_
#define SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_

#include <cstdint>
#include <map>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace sandgate::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1800000000)) : now_(start) {}

  absl::Time Now() const override;
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                         absl::Time deadline) override;
  bool SleepUntil(absl::Time deadline, const CancelToken* cancel = nullptr) override;

  // Moves time forward (never back); waiters whose deadline is now due return.
  void Advance(absl::Duration d);
  void SetTime(absl::Time t);  // t >= Now()

  // Blocks (up to `real_timeout` of real time) until at least `n` waiters are waiting for a
  // deadline still in the future, and each has looked at its condition (or cancel token) since
  // this call began: every timer that came due has run and waits again, and a waiter whose
  // condition the test has just made true has returned. Returns false on timeout, so a test
  // fails instead of hanging. `n` is the number of timer threads the component keeps.
  bool BlockUntilSettled(int n, absl::Duration real_timeout = absl::Seconds(10)) const;
  // Waiters right now (any deadline).
  int waiters() const;

 private:
  struct Waiter {
    absl::Time deadline;
    // The settle generation in which the waiter last found its condition false and its
    // deadline ahead; -1 before its first look.
    int64_t parked_in;
  };
  int64_t Register(absl::Time deadline) const;
  void Unregister(int64_t id) const;
  int64_t Generation() const;
  // Marks waiter `id` parked in `generation`; false when its deadline is due.
  bool Park(int64_t id, int64_t generation) const;

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::map<int64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_CLOCK_H_
