#include "server/callback_queue_waker.h"

#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::server {
namespace {

using sandgate::testing::FakeClock;

// One completion per period of the injected clock, none before it: the period is the rule
// (under gRPC's 1 s wait), the call only its vehicle.
TEST(CallbackQueueWaker, CompletesOneCallPerPeriodOfItsClock) {
  FakeClock clock;
  CallbackQueueWaker waker(&clock, absl::Milliseconds(250));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  clock.Advance(absl::Milliseconds(249));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(waker.completions(), 0);
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(waker.AwaitCompletions(1, absl::Seconds(10)));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(waker.completions(), 1);
  clock.Advance(absl::Milliseconds(250));
  EXPECT_TRUE(waker.AwaitCompletions(2, absl::Seconds(10)));
}

// The destructor waits for a call it started: its callback must not outlive the waker.
TEST(CallbackQueueWaker, DestroyedRightAfterStartingACall) {
  FakeClock clock;
  for (int i = 0; i < 20; ++i) {
    CallbackQueueWaker waker(&clock, absl::Milliseconds(250));
    ASSERT_TRUE(clock.BlockUntilSettled(1));
    clock.Advance(absl::Milliseconds(250));
  }
}

}  // namespace
}  // namespace sandgate::server
