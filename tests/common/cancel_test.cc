#include "common/cancel.h"

#include <poll.h>

#include <thread>

#include "gtest/gtest.h"

namespace sandgate {
namespace {

TEST(CancelTokenTest, FirstReasonWinsAndFdBecomesReadable) {
  CancelToken token;
  EXPECT_FALSE(token.cancelled());
  struct pollfd p = {token.fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  token.Cancel("first");
  token.Cancel("second");
  EXPECT_TRUE(token.cancelled());
  EXPECT_EQ(token.reason(), "first");
  EXPECT_EQ(poll(&p, 1, 0), 1);
}

TEST(CancelTokenTest, WaitForWakesOnCancelFromAnotherThread) {
  CancelToken token;
  std::thread t([&] { token.Cancel("stop"); });
  EXPECT_TRUE(token.WaitFor(absl::Seconds(30)));
  t.join();
}

TEST(CancelTokenTest, WaitForTimesOutWhenNotCancelled) {
  CancelToken token;
  EXPECT_FALSE(token.WaitFor(absl::Milliseconds(1)));
}

}  // namespace
}  // namespace sandgate
