#include "tests/fakes/fake_clock.h"

#include "absl/time/clock.h"
#include "common/cancel.h"

namespace sandgate::testing {
namespace {
// How often a waiter looks at fake time and its condition again (real time). Only tests pay.
constexpr absl::Duration kPoll = absl::Milliseconds(1);
}  // namespace

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  if (d > absl::ZeroDuration()) now_ += d;
}

void FakeClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  if (t > now_) now_ = t;
}

int64_t FakeClock::Register(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  waiters_[next_id_] = Waiter{deadline, -1};
  return next_id_++;
}

void FakeClock::Unregister(int64_t id) const {
  absl::MutexLock lock(&mu_);
  waiters_.erase(id);
}

int64_t FakeClock::Generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

bool FakeClock::Park(int64_t id, int64_t generation) const {
  absl::MutexLock lock(&mu_);
  Waiter& w = waiters_[id];
  if (w.deadline <= now_) return false;
  w.parked_in = generation;
  return true;
}

// Each round reads the generation before it evaluates the condition, so a waiter marked
// parked in generation g has seen everything that happened before BlockUntilSettled opened g.
bool FakeClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  const int64_t id = Register(deadline);
  bool held = false;
  for (;;) {
    const int64_t generation = Generation();
    held = cond.Eval();
    if (held || !Park(id, generation)) break;
    mu.AwaitWithTimeout(cond, kPoll);  // a pause that ends early; the loop re-evaluates
  }
  Unregister(id);
  return held;
}

bool FakeClock::SleepUntil(absl::Time deadline, const CancelToken* cancel) {
  const int64_t id = Register(deadline);
  bool cancelled = false;
  for (;;) {
    const int64_t generation = Generation();
    cancelled = cancel != nullptr && cancel->cancelled();
    if (cancelled || !Park(id, generation)) break;
    if (cancel != nullptr) {
      cancel->WaitFor(kPoll);
    } else {
      absl::SleepFor(kPoll);
    }
  }
  Unregister(id);
  return cancelled;
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

bool FakeClock::BlockUntilSettled(int n, absl::Duration real_timeout) const {
  absl::MutexLock lock(&mu_);
  const int64_t generation = ++generation_;
  auto settled = [this, n, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int parked = 0;
    for (const auto& [id, w] : waiters_) {
      // Due, or not yet looked at its condition since this call began: its thread may still
      // act on what the test just did.
      if (w.deadline <= now_ || w.parked_in < generation) return false;
      ++parked;
    }
    return parked >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&settled), real_timeout);
}

}  // namespace sandgate::testing
