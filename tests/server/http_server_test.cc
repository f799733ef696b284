// ExchangeClose (server/http_server.h): the close rule both the HTTP server's exchange and the
// REST fuzz target's follow. A callback is told exactly once: at the close when set before
// it, at once when set after it; a later one replaces an earlier one.
#include "server/http_server.h"

#include <functional>

#include "gtest/gtest.h"

namespace sandgate::server {
namespace {

TEST(ExchangeCloseTest, ACallbackSetBeforeTheCloseRunsAtTheCloseOnce) {
  ExchangeClose close;
  int told = 0;
  EXPECT_FALSE(close.Set([&] { ++told; }));  // kept, nothing to run now
  EXPECT_FALSE(close.closed());
  std::function<void()> run = close.Close();
  ASSERT_TRUE(run);
  run();
  EXPECT_TRUE(close.closed());
  EXPECT_FALSE(close.Close()) << "told twice";
  EXPECT_EQ(told, 1);
}

TEST(ExchangeCloseTest, ACallbackSetAfterTheCloseIsHandedBackToRunAtOnce) {
  ExchangeClose close;
  EXPECT_FALSE(close.Close()) << "nothing was set";
  int told = 0;
  std::function<void()> now = close.Set([&] { ++told; });
  ASSERT_TRUE(now);
  now();
  EXPECT_EQ(told, 1);
  EXPECT_FALSE(close.Close());
}

TEST(ExchangeCloseTest, ALaterCallbackReplacesAnEarlierOne) {
  ExchangeClose close;
  int first = 0;
  int second = 0;
  close.Set([&] { ++first; });
  close.Set([&] { ++second; });
  close.Close()();
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
}

}  // namespace
}  // namespace sandgate::server
