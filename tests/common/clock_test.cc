#include "common/clock.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate {
namespace {

using testing::FakeClock;

TEST(RealClock, AwaitWithDeadlineReturnsWhenTheConditionHolds) {
  absl::Mutex mu;
  bool flag = false;
  std::thread t([&] {
    absl::MutexLock lock(&mu);
    flag = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(Clock::Real()->AwaitWithDeadline(mu, absl::Condition(&flag),
                                                 absl::Now() + absl::Seconds(30)));
  }
  t.join();
}

// AwaitFor counts elapsed time: a past or infinite timeout must not overflow its monotonic
// deadline (a negative one waited for ever: the replica heartbeat's first round never came).
TEST(RealClock, AwaitForReturnsOnTheConditionAndAtOnceForANonPositiveTimeout) {
  absl::Mutex mu;
  bool ready = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(Clock::Real()->AwaitFor(mu, absl::Condition(&ready), -absl::InfiniteDuration()));
  EXPECT_FALSE(Clock::Real()->AwaitFor(mu, absl::Condition(&ready), absl::ZeroDuration()));
  EXPECT_FALSE(Clock::Real()->AwaitFor(mu, absl::Condition(&ready), absl::Milliseconds(20)));
  std::thread setter([&] {
    absl::MutexLock l(&mu);
    ready = true;
  });
  EXPECT_TRUE(Clock::Real()->AwaitFor(mu, absl::Condition(&ready), absl::InfiniteDuration()));
  mu.Unlock();
  setter.join();
  mu.Lock();
}

TEST(RealClock, SleepUntilEndsAtOnceWhenCancelled) {
  CancelToken cancel;
  cancel.Cancel("test");
  EXPECT_TRUE(Clock::Real()->SleepUntil(absl::Now() + absl::Hours(1), &cancel));
}

TEST(RealClock, SleepUntilAPastDeadlineReturnsFalse) {
  CancelToken cancel;
  EXPECT_FALSE(Clock::Real()->SleepUntil(absl::Now() - absl::Seconds(1), &cancel));
}

// A waiter with a deadline in fake time: not released a nanosecond before it, released at it.
TEST(FakeClock, AwaitEndsExactlyAtTheFakeDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Minutes(5);
  absl::Mutex mu;
  bool never = false;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(mu, absl::Condition(&never), deadline));
    EXPECT_GE(clock.Now(), deadline);
    returned = true;
  });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  clock.Advance(absl::Minutes(5) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(1));  // still waiting: the deadline is 1 ns away
  EXPECT_FALSE(returned);
  clock.Advance(absl::Nanoseconds(1));
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(FakeClock, AwaitEndsWhenTheConditionHoldsWithoutTimeMoving) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  absl::Mutex mu;
  bool flag = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(clock.AwaitWithDeadline(mu, absl::Condition(&flag), start + absl::Hours(1)));
  });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  {
    absl::MutexLock lock(&mu);
    flag = true;
  }
  waiter.join();
  EXPECT_EQ(clock.Now(), start);
}

TEST(FakeClock, SleepUntilIsReleasedByAdvanceOrCancel) {
  FakeClock clock;
  CancelToken cancel;
  std::thread by_time([&] { EXPECT_FALSE(clock.SleepFor(absl::Seconds(2))); });
  std::thread by_cancel([&] { EXPECT_TRUE(clock.SleepFor(absl::Hours(1), &cancel)); });
  ASSERT_TRUE(clock.BlockUntilSettled(2));
  clock.Advance(absl::Seconds(2));
  by_time.join();
  cancel.Cancel("test");
  by_cancel.join();
}

// A periodic timer thread re-arms after each due deadline; BlockUntilSettled waits for it to
// come back, so a test sees the effect of each tick before it asserts.
TEST(FakeClock, BlockUntilSettledWaitsForADueTimerToRunAndWaitAgain) {
  FakeClock clock;
  absl::Mutex mu;
  bool stop = false;
  int ticks = 0;
  std::thread timer([&] {
    absl::MutexLock lock(&mu);
    while (!stop) {
      if (!clock.AwaitWithDeadline(mu, absl::Condition(&stop), clock.Now() + absl::Seconds(1))) {
        ++ticks;
      }
    }
  });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  for (int i = 1; i <= 3; ++i) {
    clock.Advance(absl::Seconds(1));
    ASSERT_TRUE(clock.BlockUntilSettled(1));
    absl::MutexLock lock(&mu);
    EXPECT_EQ(ticks, i);
  }
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
  timer.join();
}

// A timer thread woken by the test (not by time) has acted on the wake-up before
// BlockUntilSettled returns: its old deadline still being ahead does not count as settled.
TEST(FakeClock, BlockUntilSettledWaitsForAWaiterWhoseConditionTheTestMadeTrue) {
  FakeClock clock;
  absl::Mutex mu;
  bool stop = false, kicked = false;
  int handled = 0;
  auto woken = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop || kicked; };
  std::thread timer([&] {
    absl::MutexLock lock(&mu);
    while (!stop) {
      clock.AwaitWithDeadline(mu, absl::Condition(&woken), clock.Now() + absl::Hours(1));
      if (kicked) {
        kicked = false;
        ++handled;
      }
    }
  });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  for (int i = 1; i <= 50; ++i) {
    {
      absl::MutexLock lock(&mu);
      kicked = true;
    }
    ASSERT_TRUE(clock.BlockUntilSettled(1));
    absl::MutexLock lock(&mu);
    ASSERT_EQ(handled, i);
  }
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
  timer.join();
}

TEST(FakeClock, BlockUntilSettledTimesOutWhenNobodyWaits) {
  FakeClock clock;
  EXPECT_FALSE(clock.BlockUntilSettled(1, absl::Milliseconds(20)));
}

}  // namespace
}  // namespace sandgate
