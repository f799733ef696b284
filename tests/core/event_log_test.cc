#include "core/event_log.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::core {
namespace {

using testing::FakeClock;

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-log-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    log_ = std::make_unique<EventLog>(store_.get(), &clock_);
  }
  void TearDown() override {
    log_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  v1::Event Ev(const std::string& run) {
    v1::Event e;
    e.set_run_id(run);
    e.set_type("notice");
    return e;
  }
  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<EventLog> log_;
};

TEST_F(EventLogTest, SeqIsDensePerRunAndTimeComesFromTheClock) {
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 1);
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 2);
  EXPECT_EQ(log_->Append(Ev("b"))->seq(), 1);
  auto e = log_->Append(Ev("a"));
  EXPECT_EQ(e->seq(), 3);
  EXPECT_EQ(e->time().seconds(), absl::ToUnixSeconds(clock_.Now()));
  auto read = log_->Read("a", 1, 10);
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].seq(), 2);
}

TEST_F(EventLogTest, SeqContinuesAfterReopen) {
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  log_ = std::make_unique<EventLog>(store_.get(), &clock_);
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 3);
}

TEST_F(EventLogTest, WaitFiresAtOnceWhenTheRunIsAlreadyPastTheSeq) {
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  std::atomic<int> fired{-1};
  log_->Wait("a", 0, absl::Seconds(10), [&](EventLog::WaitResult r) { fired = static_cast<int>(r); });
  EXPECT_EQ(fired.load(), static_cast<int>(EventLog::WaitResult::kReady));
}

TEST_F(EventLogTest, WaitFiresOnAppendOfThatRunOnly) {
  std::atomic<int> fired{0};
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult r) {
    EXPECT_EQ(r, EventLog::WaitResult::kReady);
    ++fired;
  });
  ASSERT_TRUE(log_->Append(Ev("b")).ok());
  EXPECT_EQ(fired.load(), 0);
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  EXPECT_EQ(fired.load(), 1);
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  EXPECT_EQ(fired.load(), 1) << "a wait fires once";
}

TEST_F(EventLogTest, WaitTimesOutOnTheInjectedClock) {
  std::atomic<bool> timed_out{false};
  log_->Wait("a", 0, absl::Seconds(15), [&](EventLog::WaitResult r) {
    timed_out = r == EventLog::WaitResult::kTimeout;
  });
  clock_.Advance(absl::Seconds(16));
  for (int i = 0; i < 100 && !timed_out; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(timed_out.load());
}

TEST_F(EventLogTest, CancelledWaitNeverFiresAndShutdownFiresTheRest) {
  std::atomic<int> first{0}, second{0};
  uint64_t id = log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult) { ++first; });
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult r) {
    if (r == EventLog::WaitResult::kShutdown) ++second;
  });
  EXPECT_TRUE(log_->CancelWait(id));
  EXPECT_FALSE(log_->CancelWait(id));
  log_->Shutdown();
  EXPECT_EQ(first.load(), 0);
  EXPECT_EQ(second.load(), 1);
  std::atomic<bool> after{false};
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult r) { after = r == EventLog::WaitResult::kShutdown; });
  EXPECT_TRUE(after.load());
}

}  // namespace
}  // namespace sandgate::core
