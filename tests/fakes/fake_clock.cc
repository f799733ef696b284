#include "tests/fakes/fake_clock.h"

#include "absl/time/clock.h"
#include "common/cancel.h"

namespace sandgate::testing {
namespace {
// How often a waiter looks at fake time again (real time). Only tests pay for it.
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
  deadlines_[next_id_] = deadline;
  return next_id_++;
}

void FakeClock::Unregister(int64_t id) const {
  absl::MutexLock lock(&mu_);
  deadlines_.erase(id);
}

bool FakeClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  const int64_t id = Register(deadline);
  bool held = cond.Eval();
  while (!held && Now() < deadline) held = mu.AwaitWithTimeout(cond, kPoll);
  Unregister(id);
  return held;
}

bool FakeClock::SleepUntil(absl::Time deadline, const CancelToken* cancel) {
  const int64_t id = Register(deadline);
  bool cancelled = cancel != nullptr && cancel->cancelled();
  while (!cancelled && Now() < deadline) {
    if (cancel != nullptr) {
      cancelled = cancel->WaitFor(kPoll);
    } else {
      absl::SleepFor(kPoll);
    }
  }
  Unregister(id);
  return cancelled;
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(deadlines_.size());
}

bool FakeClock::BlockUntilSettled(int n, absl::Duration real_timeout) const {
  auto settled = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int waiting = 0;
    for (const auto& [id, deadline] : deadlines_) {
      if (deadline <= now_) return false;  // due: its thread has not seen the new time yet
      ++waiting;
    }
    return waiting >= n;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&settled), real_timeout);
}

}  // namespace sandgate::testing
