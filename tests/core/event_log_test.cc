#include "core/event_log.h"

#include <atomic>
#include <cstdlib>

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

// The log keeps one timer thread on the clock.
constexpr int kTimers = 1;

// Records how a wait ended; -1 while it has not.
struct Outcome {
  std::atomic<int> result{-1};
  EventLog::WaitCallback cb() {
    return [this](EventLog::WaitResult r) { result = static_cast<int>(r); };
  }
  bool timed_out() const { return result == static_cast<int>(EventLog::WaitResult::kTimeout); }
  bool fired() const { return result != -1; }
};

// Proves "not before" and "at": `wait` has not fired 1 ns before `left` from now, and has
// timed out at it.
void ExpectTimesOutIn(FakeClock& clock, const Outcome& wait, absl::Duration left) {
  clock.Advance(left - absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(kTimers));
  EXPECT_FALSE(wait.fired()) << "fired before its deadline";
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(kTimers));
  EXPECT_TRUE(wait.timed_out()) << "did not time out at its deadline";
}

// A follower's wait (StreamEvents' heartbeat interval) times out at its deadline, not a
// nanosecond before.
TEST_F(EventLogTest, WaitTimesOutExactlyAtItsTimeout) {
  Outcome wait;
  log_->Wait("a", 0, absl::Seconds(15), wait.cb());
  ExpectTimesOutIn(clock_, wait, absl::Seconds(15));
}

// The timer sleeps until the earliest deadline: a shorter wait added after a longer one
// still fires at its own deadline, and the longer one at its own.
TEST_F(EventLogTest, AShorterWaitAddedLaterFiresAtItsOwnDeadline) {
  Outcome longer, shorter;
  log_->Wait("a", 0, absl::Seconds(60), longer.cb());
  ASSERT_TRUE(clock_.BlockUntilSettled(kTimers));
  clock_.Advance(absl::Seconds(10));
  log_->Wait("b", 0, absl::Seconds(5), shorter.cb());
  ExpectTimesOutIn(clock_, shorter, absl::Seconds(5));
  EXPECT_FALSE(longer.fired());
  ExpectTimesOutIn(clock_, longer, absl::Seconds(45));
}

// A follower that waits again after each heartbeat gets one every interval, counted from
// when it waited again.
TEST_F(EventLogTest, AWaitArmedAgainTimesOutOneIntervalLater) {
  for (int beat = 0; beat < 3; ++beat) {
    Outcome wait;
    log_->Wait("a", 0, absl::Seconds(15), wait.cb());
    SCOPED_TRACE(beat);
    ExpectTimesOutIn(clock_, wait, absl::Seconds(15));
  }
}

// An append ends the wait before its timeout, and the timeout never fires afterwards.
TEST_F(EventLogTest, AnAnsweredWaitNeverTimesOut) {
  std::atomic<int> calls{0};
  log_->Wait("a", 0, absl::Seconds(15), [&](EventLog::WaitResult r) {
    EXPECT_EQ(r, EventLog::WaitResult::kReady);
    ++calls;
  });
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(clock_.BlockUntilSettled(kTimers));
  EXPECT_EQ(calls.load(), 1);
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
