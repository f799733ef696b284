#include "core/event_log.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_notifier.h"
#include "tests/fakes/forwarding_store.h"

namespace sandgate::core {
namespace {

using testing::FakeClock;

// A SqliteStore seen through: counts event reads and batch appends (transactions), can hold
// a batch until the test lets it go (to see what the log does while the store writes), and
// can fail the batches holding an event of one run.
class ObservedStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  std::atomic<int> event_reads{0};
  std::atomic<int> transactions{0};
  std::atomic<bool> hold_appends{false};
  absl::Notification append_entered, release_append;
  absl::Mutex mu;
  std::string fail_run ABSL_GUARDED_BY(mu);  // batches with an event of it fail

  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override {
    if (hold_appends.exchange(false)) {
      append_entered.Notify();
      release_append.WaitForNotification();
    }
    {
      absl::MutexLock lock(&mu);
      for (const v1::Event& e : events) {
        if (e.run_id() == fail_run) return absl::UnavailableError("disk I/O error");
      }
    }
    ++transactions;
    return inner()->AppendEventsWithRuns(events, runs);
  }
  absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& run, int64_t after,
                                                    uint32_t limit) override {
    ++event_reads;
    return inner()->ReadEvents(run, after, limit);
  }
};

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
  ASSERT_TRUE(log_->Flush("a").ok());
  auto read = log_->Read("a", 1, 10);
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].seq(), 2);
}

// Issue 20 item 3: a loop of refused CONNECTs stored 155,270 network.decision events in 20 s.
// The events a sandbox causes pass a bucket and a total per log; what is dropped is told.
class BoundedEventLogTest : public EventLogTest {
 protected:
  void SetUp() override {
    EventLogTest::SetUp();
    log_ = std::make_unique<EventLog>(store_.get(), &clock_, FollowOptions(),
                                      SandboxEventLimits{/*per_second=*/10, /*burst=*/5,
                                                         /*max_per_log=*/20});
  }
  // Appends `n` events of `type` to `run`; returns how many were stored.
  int Flood(const std::string& run, const std::string& type, int n) {
    int stored = 0;
    for (int i = 0; i < n; ++i) {
      v1::Event e;
      e.set_run_id(run);
      e.set_session_id("ses_1");
      e.set_type(type);
      absl::StatusOr<v1::Event> got = log_->Append(e);
      EXPECT_TRUE(got.ok()) << got.status();
      if (got.ok() && got->seq() > 0) ++stored;
    }
    return stored;
  }
  std::vector<v1::Event> All(const std::string& run) {
    EXPECT_TRUE(log_->Flush(run).ok());
    absl::StatusOr<std::vector<v1::Event>> all = log_->Read(run, 0, 10000);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? *all : std::vector<v1::Event>();
  }
};

// Counts of an events.dropped, as "type=n,...".
std::string Counts(const v1::Event& e) {
  std::map<std::string, uint64_t> sorted(e.events_dropped().counts().begin(),
                                         e.events_dropped().counts().end());
  std::string out;
  for (const auto& [type, n] : sorted) absl::StrAppend(&out, out.empty() ? "" : ",", type, "=", n);
  return out;
}

TEST_F(BoundedEventLogTest, ASandboxsFloodIsCutToTheBucketAndTheDropsAreToldOnRecovery) {
  EXPECT_EQ(Flood("r", "network.decision", 100), 5) << "the burst";
  EXPECT_EQ(Flood("r", "notice", 3), 3) << "the daemon's own events are never held back";
  EXPECT_EQ(Flood("other", "network.decision", 5), 5) << "another log has a bucket of its own";
  clock_.Advance(absl::Milliseconds(99));
  EXPECT_EQ(Flood("r", "network.decision", 1), 0) << "0.99 of a token";
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(Flood("r", "command.output", 1), 1) << "one token at 10 a second";
  std::vector<v1::Event> events = All("r");
  ASSERT_EQ(events.size(), 10u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(events[i].type(), "network.decision");
  for (int i = 5; i < 8; ++i) EXPECT_EQ(events[i].type(), "notice");
  // With the first event let through again, one summary of what was dropped before it.
  EXPECT_EQ(events[8].type(), "events.dropped");
  EXPECT_EQ(Counts(events[8]), "network.decision=96");
  EXPECT_FALSE(events[8].events_dropped().total_reached());
  EXPECT_EQ(events[8].session_id(), "ses_1");
  EXPECT_EQ(events[9].type(), "command.output");
  EXPECT_EQ(events[9].seq(), 10);
}

TEST_F(BoundedEventLogTest, ATotalPerLogEndsWithOneSummaryAndTheRestIsToldAtTheEnd) {
  int stored = 0;
  // Two seconds of quiet refill the burst (5) each time: 4 rounds store 20, the total.
  for (int round = 0; round < 4; ++round) {
    stored += Flood("r", "network.decision", 7);
    clock_.Advance(absl::Seconds(2));
  }
  EXPECT_EQ(stored, 20);
  EXPECT_EQ(Flood("r", "command.output", 50), 0) << "the total is reached, whatever the bucket";
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(Flood("r", "network.decision", 3), 0);
  v1::Event finished;
  finished.set_run_id("r");
  finished.set_session_id("ses_1");
  finished.set_type("run.finished");
  ASSERT_TRUE(log_->Append(finished).ok());

  std::vector<v1::Event> events = All("r");
  std::vector<std::string> summaries;
  for (const v1::Event& e : events) {
    if (e.type() == "events.dropped") {
      summaries.push_back(
          absl::StrCat(Counts(e), e.events_dropped().total_reached() ? " total" : ""));
    }
  }
  // Rounds 2-4 each told round 1-3's two drops; the total's summary, at once; the rest at
  // the end, just before the log's last event.
  EXPECT_EQ(summaries, (std::vector<std::string>{"network.decision=2", "network.decision=2",
                                                 "network.decision=2", "network.decision=1 total",
                                                 "command.output=50,network.decision=4 total"}));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].type(), "events.dropped");
  EXPECT_EQ(events.back().type(), "run.finished");
  EXPECT_EQ(events.size(), 20u + 5u + 1u);
}

TEST_F(BoundedEventLogTest, AnEndlessFloodAtTheBucketsRateIsToldAtMostOnceASecond) {
  int stored = 0;
  for (int step = 0; step < 100; ++step) {  // 10 s, 100 events every 0.1 s
    stored += Flood("r", "network.decision", 100);
    clock_.Advance(absl::Milliseconds(100));
  }
  // Burst 5, then 10 a second; the total (20) caps it.
  EXPECT_EQ(stored, 20);
  int summaries = 0;
  for (const v1::Event& e : All("r")) summaries += e.type() == "events.dropped";
  EXPECT_LE(summaries, 3) << "one a second at most while it lasts, and one for the total";
}

TEST_F(EventLogTest, SeqContinuesAfterReopen) {
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  log_ = std::make_unique<EventLog>(store_.get(), &clock_);
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 3);
}

TEST_F(EventLogTest, WaitFiresAtOnceWhenTheRunIsAlreadyPastTheSeq) {
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
  std::atomic<int> fired{-1};
  log_->Wait("a", 0, absl::Seconds(10),
             [&](EventLog::WaitResult r) { fired = static_cast<int>(r); });
  EXPECT_EQ(fired.load(), static_cast<int>(EventLog::WaitResult::kReady));
}

TEST_F(EventLogTest, WaitFiresOnAppendOfThatRunOnly) {
  std::atomic<int> fired{0};
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult r) {
    EXPECT_EQ(r, EventLog::WaitResult::kReady);
    ++fired;
  });
  ASSERT_TRUE(log_->Append(Ev("b")).ok());
  ASSERT_TRUE(log_->Flush("b").ok());
  EXPECT_EQ(fired.load(), 0);
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
  EXPECT_EQ(fired.load(), 1);
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
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
  ASSERT_TRUE(log_->Flush("a").ok());
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
  log_->Wait("a", 0, absl::Hours(1),
             [&](EventLog::WaitResult r) { after = r == EventLog::WaitResult::kShutdown; });
  EXPECT_TRUE(after.load());
}

// Where a follower would wait for ever: at or past its log's stored terminal event. Not
// before it, not while the run goes on, not in a log that has none; and the same seen from
// another log on the store (another replica's, a restarted daemon's).
TEST_F(EventLogTest, ALogHasEndedOnlyAtOrPastItsTerminalEvent) {
  EventLog other(store_.get(), &clock_);
  auto ended = [](EventLog& log, const std::string& run, int64_t after) {
    absl::StatusOr<bool> e = log.Ended(run, after);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() && *e;
  };
  ASSERT_TRUE(log_->Append(Ev("r")).ok());
  ASSERT_TRUE(log_->Flush("r").ok());
  EXPECT_FALSE(ended(*log_, "r", 1)) << "appending";
  EXPECT_FALSE(ended(other, "r", 1)) << "its last stored event is not terminal";
  EXPECT_FALSE(ended(other, "none", 0));
  v1::Event finished = Ev("r");
  finished.set_type("run.finished");
  ASSERT_EQ(log_->Append(finished)->seq(), 2);
  for (EventLog* log : {log_.get(), &other}) {
    EXPECT_FALSE(ended(*log, "r", 1)) << "run.finished is still to be read";
    EXPECT_TRUE(ended(*log, "r", 2));
    EXPECT_TRUE(ended(*log, "r", 7));
  }

  // A kept session's own log ends with its session.closed; an ephemeral session's, in its
  // run's log, does not end that log.
  v1::Event closed = Ev("ses");
  closed.set_session_id("ses");
  closed.set_type("session.closed");
  EXPECT_TRUE(IsTerminal(closed));
  ASSERT_EQ(log_->Append(closed)->seq(), 1);
  EXPECT_TRUE(ended(other, "ses", 1));
  v1::Event in_run = Ev("q");
  in_run.set_session_id("ses-of-q");
  in_run.set_type("session.closed");
  EXPECT_FALSE(IsTerminal(in_run));
  ASSERT_EQ(log_->Append(in_run)->seq(), 1);
  ASSERT_TRUE(log_->Flush("q").ok());
  EXPECT_FALSE(ended(other, "q", 1));
}

// Reads `run` from after_seq 0 in batches of `limit`; the seqs seen, in order.
std::vector<int64_t> ReadAll(EventLog& log, const std::string& run, uint32_t limit) {
  std::vector<int64_t> seqs;
  for (;;) {
    auto batch = log.Read(run, seqs.empty() ? 0 : seqs.back(), limit);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok() || batch->empty()) return seqs;
    for (const v1::Event& e : *batch) seqs.push_back(e.seq());
  }
}

class EventLogTailTest : public EventLogTest {
 protected:
  void SetUp() override {
    EventLogTest::SetUp();
    observed_ = std::make_unique<ObservedStore>(store_.get());
    log_ = std::make_unique<EventLog>(observed_.get(), &clock_);
  }
  void TearDown() override {
    log_.reset();
    observed_.reset();
    EventLogTest::TearDown();
  }
  std::unique_ptr<ObservedStore> observed_;
};

// 100 followers of one live run each read every new event: from memory, not 100 store reads.
TEST_F(EventLogTailTest, FollowersOfALiveRunReadItsNewestEventsWithoutTheStore) {
  std::vector<int64_t> position(100, 0);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(log_->Append(Ev("a")).ok());
    ASSERT_TRUE(log_->Flush("a").ok());
    for (int64_t& at : position) {
      auto batch = log_->Read("a", at, 256);
      ASSERT_TRUE(batch.ok());
      ASSERT_EQ(batch->size(), 1u);
      EXPECT_EQ((*batch)[0].seq(), at + 1);
      at = (*batch)[0].seq();
    }
  }
  EXPECT_EQ(observed_->event_reads.load(), 0);
}

// A reader behind the tail, or reading across its start, gets every event once, in order:
// the older part from the store, the rest from memory.
TEST_F(EventLogTailTest, EveryEventOnceInOrderAcrossTheTailsStartAndAfterTheRunFinishes) {
  constexpr int kEvents = 700;  // more than a tail keeps
  for (int i = 0; i < kEvents; ++i) ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
  std::vector<int64_t> want(kEvents);
  for (int i = 0; i < kEvents; ++i) want[i] = i + 1;
  for (uint32_t limit : {1u, 7u, 100u, 256u, 1000u}) {
    EXPECT_EQ(ReadAll(*log_, "a", limit), want) << "batches of " << limit;
  }
  EXPECT_GT(observed_->event_reads.load(), 0) << "the oldest events come from the store";
  const int store_reads = observed_->event_reads.load();
  EXPECT_EQ(log_->Read("a", kEvents - 5, 256)->size(), 5u);
  EXPECT_EQ(observed_->event_reads.load(), store_reads) << "the newest come from memory";

  v1::Event fin = Ev("a");
  fin.set_type("run.finished");
  fin.mutable_run_finished();
  ASSERT_EQ(log_->Append(fin)->seq(), kEvents + 1);
  ASSERT_TRUE(log_->Flush("a").ok());
  want.push_back(kEvents + 1);
  EXPECT_EQ(ReadAll(*log_, "a", 256), want);
  // After reopening (a restart), reads and seqs continue from the store alone.
  log_ = std::make_unique<EventLog>(observed_.get(), &clock_);
  EXPECT_EQ(ReadAll(*log_, "a", 100), want);
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), kEvents + 2);
}

// While the store writes a batch, the log still answers followers, and producers go on.
TEST_F(EventLogTailTest, TheStoreWriteOfOneRunDoesNotHoldUpOtherRunsFollowers) {
  ASSERT_TRUE(log_->Append(Ev("b")).ok());
  ASSERT_TRUE(log_->Flush("b").ok());
  observed_->hold_appends = true;
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 1);
  observed_->append_entered.WaitForNotification();
  absl::Notification answered;
  std::thread follower([&] {
    EXPECT_EQ(log_->Read("b", 0, 10)->size(), 1u);
    log_->Wait("b", 1, absl::Hours(1), [](EventLog::WaitResult) {});
    answered.Notify();
  });
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "Read/Wait waited for another run's store write";
  observed_->release_append.Notify();
  follower.join();
  ASSERT_TRUE(log_->Flush("a").ok());
  // The held event was persisted and is read once, in order, after the release.
  EXPECT_EQ(ReadAll(*log_, "a", 10), std::vector<int64_t>{1});
}

std::vector<int64_t> OneTo(int n) {
  std::vector<int64_t> seqs(n);
  for (int i = 0; i < n; ++i) seqs[i] = i + 1;
  return seqs;
}

// Group commit: while the store writes one batch, a producer's burst queues behind it and is
// committed in one more transaction, not one per event; the producer never waits for it.
TEST_F(EventLogTailTest, ABurstOfAppendsIsCommittedInFewerTransactionsThanEvents) {
  constexpr int kEvents = 100;
  observed_->hold_appends = true;
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  observed_->append_entered.WaitForNotification();
  for (int i = 1; i < kEvents; ++i) ASSERT_EQ(log_->Append(Ev("a"))->seq(), i + 1);
  observed_->release_append.Notify();
  ASSERT_TRUE(log_->Flush("a").ok());
  EXPECT_EQ(observed_->transactions.load(), 2) << "the held event, then the other 99 at once";
  EXPECT_EQ(ReadAll(*log_, "a", 1000), OneTo(kEvents));
  EXPECT_EQ(*store_->LastSeq("a"), kEvents);
}

// A follower never sees an event the store does not hold yet: not by Read, not by Wait; it is
// woken once the event is stored.
TEST_F(EventLogTailTest, NoFollowerSeesAnEventBeforeItIsInTheStore) {
  std::atomic<int64_t> stored_when_woken{-1};
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult r) {
    EXPECT_EQ(r, EventLog::WaitResult::kReady);
    stored_when_woken = *store_->LastSeq("a");
  });
  observed_->hold_appends = true;
  ASSERT_EQ(log_->Append(Ev("a"))->seq(), 1);
  observed_->append_entered.WaitForNotification();
  EXPECT_TRUE(log_->Read("a", 0, 10)->empty()) << "read before it was stored";
  EXPECT_EQ(stored_when_woken.load(), -1) << "woken before it was stored";
  std::atomic<bool> second_woken{false};
  log_->Wait("a", 0, absl::Hours(1), [&](EventLog::WaitResult) { second_woken = true; });
  EXPECT_FALSE(second_woken.load()) << "a new wait saw the queued event";
  observed_->release_append.Notify();
  ASSERT_TRUE(log_->Flush("a").ok());
  EXPECT_EQ(stored_when_woken.load(), 1);
  EXPECT_TRUE(second_woken.load());
}

// A run's terminal event is stored, with all before it, when its Append returns: the run's
// end is reported only after that.
TEST_F(EventLogTailTest, ARunsTerminalEventIsStoredWhenItsAppendReturns) {
  observed_->hold_appends = true;
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  observed_->append_entered.WaitForNotification();
  std::atomic<bool> returned{false};
  std::thread finisher([&] {
    v1::Event fin = Ev("a");
    fin.set_type("run.finished");
    EXPECT_EQ(log_->Append(fin)->seq(), 2);
    returned = true;
  });
  EXPECT_FALSE(returned.load());
  observed_->release_append.Notify();
  finisher.join();
  EXPECT_EQ(*store_->LastSeq("a"), 2);
}

// Finish stores the run's final record in the transaction of its terminal event: a follower
// woken by run.finished reads the final record, and when that transaction fails (with
// another run's events in its batch, retried alone) neither is stored.
TEST_F(EventLogTailTest, AFinalRecordIsStoredWithItsTerminalEventOrNotAtAll) {
  v1::Run run;
  run.set_id("a");
  run.set_status(v1::RUN_STATUS_RUNNING);
  ASSERT_TRUE(store_->PutRun(run).ok());
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
  v1::Event fin = Ev("a");
  fin.set_type("run.finished");
  run.set_status(v1::RUN_STATUS_SUCCEEDED);

  {
    absl::MutexLock lock(&observed_->mu);
    observed_->fail_run = "a";
  }
  observed_->hold_appends = true;
  ASSERT_TRUE(log_->Append(Ev("b")).ok());
  observed_->append_entered.WaitForNotification();
  ASSERT_TRUE(log_->Append(Ev("b")).ok());
  std::thread finisher([&] {
    // Queued while b's first batch is held: stored after it, most often in one batch with
    // b's second event (then retried event by event), else alone; neither way is a stored.
    EXPECT_EQ(log_->Finish(fin, run).status().code(), absl::StatusCode::kUnavailable);
  });
  observed_->release_append.Notify();
  finisher.join();
  EXPECT_EQ(store_->GetRun("a")->status(), v1::RUN_STATUS_RUNNING) << "neither was stored";
  EXPECT_EQ(*store_->LastSeq("a"), 1);
  EXPECT_EQ(*store_->LastSeq("b"), 2) << "b's events were stored on their own";

  {
    absl::MutexLock lock(&observed_->mu);
    observed_->fail_run.clear();
  }
  absl::Notification woken;
  log_->Wait("a", 1, absl::Hours(1), [&](EventLog::WaitResult) { woken.Notify(); });
  const int before = observed_->transactions.load();
  ASSERT_EQ(log_->Finish(fin, run)->seq(), 2);
  EXPECT_EQ(observed_->transactions.load(), before + 1) << "one transaction for both";
  woken.WaitForNotification();
  EXPECT_EQ(log_->Read("a", 1, 10)->back().type(), "run.finished");
  EXPECT_EQ(store_->GetRun("a")->status(), v1::RUN_STATUS_SUCCEEDED);

  // Only a run's own terminal event carries its record.
  v1::Run other = run;
  other.set_id("b");
  EXPECT_EQ(log_->Finish(fin, other).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(log_->Finish(Ev("a"), run).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store_->LastSeq("a"), 2);
}

// Producers of several runs append concurrently while a follower of each follows it live:
// each follower sees its run's events once, in order, across however many batches.
TEST_F(EventLogTailTest, EveryEventOnceInOrderAcrossBatchesOfSeveralRuns) {
  constexpr int kRuns = 3, kEvents = 2000;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kRuns);
  for (int r = 0; r < kRuns; ++r) {
    const std::string run = absl::StrCat("run", r);
    threads.emplace_back([&, run] {
      for (int i = 0; i < kEvents; ++i) ASSERT_TRUE(log_->Append(Ev(run)).ok());
    });
    threads.emplace_back([&, run, r] {
      while (seen[r].size() < kEvents) {
        const int64_t at = seen[r].empty() ? 0 : seen[r].back();
        absl::Notification woken;
        log_->Wait(run, at, absl::Hours(1), [&](EventLog::WaitResult) { woken.Notify(); });
        woken.WaitForNotification();
        auto batch = log_->Read(run, at, 100);
        ASSERT_TRUE(batch.ok());
        for (const v1::Event& e : *batch) seen[r].push_back(e.seq());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRuns; ++r) EXPECT_EQ(seen[r], OneTo(kEvents)) << "run" << r;
  EXPECT_LT(observed_->transactions.load(), kRuns * kEvents);
}

// A batch the store refuses is not forgotten: it is counted, the run's next Append reports it
// (and is refused), and the run's seqs go on densely from its last stored event.
TEST_F(EventLogTailTest, AnAppendAfterAStoreErrorReportsIt) {
  ASSERT_TRUE(log_->Append(Ev("a")).ok());
  ASSERT_TRUE(log_->Flush("a").ok());
  {
    absl::MutexLock lock(&observed_->mu);
    observed_->fail_run = "a";
  }
  ASSERT_EQ(log_->Append(Ev("a"))->seq(), 2);  // queued: the store has not answered yet
  ASSERT_TRUE(log_->Flush("b").ok()) << "another run's flush does not take a's error";
  EXPECT_EQ(log_->store_errors(), 1);
  absl::StatusOr<v1::Event> refused = log_->Append(Ev("a"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("an event of a was not stored: disk I/O error"),
            std::string::npos)
      << refused.status();
  {
    absl::MutexLock lock(&observed_->mu);
    observed_->fail_run.clear();
  }
  EXPECT_EQ(log_->Append(Ev("a"))->seq(), 2) << "reported once; seqs stay dense";
  EXPECT_TRUE(log_->Flush("a").ok());
  EXPECT_EQ(ReadAll(*log_, "a", 10), OneTo(2));
}

// One run's failing event fails its own run only, though it shared a batch with others; and
// Flush reports it too.
TEST_F(EventLogTailTest, AStoreErrorFailsOnlyTheRunWhoseEventFailed) {
  {
    absl::MutexLock lock(&observed_->mu);
    observed_->fail_run = "a";
  }
  observed_->hold_appends = true;
  ASSERT_TRUE(log_->Append(Ev("c")).ok());
  observed_->append_entered.WaitForNotification();
  for (const char* run : {"a", "b", "a", "b"}) ASSERT_TRUE(log_->Append(Ev(run)).ok());
  observed_->release_append.Notify();
  absl::Status flushed = log_->Flush("a");
  EXPECT_EQ(flushed.code(), absl::StatusCode::kUnavailable) << flushed;
  EXPECT_TRUE(log_->Flush("b").ok());
  EXPECT_EQ(log_->store_errors(), 1);
  EXPECT_EQ(ReadAll(*log_, "b", 10), OneTo(2));
  EXPECT_EQ(ReadAll(*log_, "c", 10), OneTo(1));
  EXPECT_TRUE(ReadAll(*log_, "a", 10).empty());
}

// Two logs on one store, as two replicas on one database: `producer_` appends runs,
// `follower_` follows them, woken by `notifier_` (what PostgreSQL's notifications would
// carry; a test that does not send one has lost it) or by its poll.
class EventLogFollowTest : public EventLogTest {
 protected:
  static constexpr absl::Duration kPoll = absl::Milliseconds(500);
  // Both logs keep a timer thread on the clock.
  static constexpr int kBothTimers = 2;
  void SetUp() override {
    EventLogTest::SetUp();
    follower_ = std::make_unique<EventLog>(store_.get(), &clock_, FollowOptions{&notifier_, kPoll});
  }
  void TearDown() override {
    follower_.reset();
    EventLogTest::TearDown();
  }
  EventLog& producer() { return *log_; }
  // Appends `n` events of `run` on the producer, stored; returns the last seq.
  int64_t Produce(const std::string& run, int n) {
    int64_t last = 0;
    for (int i = 0; i < n; ++i) last = producer().Append(Ev(run))->seq();
    EXPECT_TRUE(producer().Flush(run).ok());
    return last;
  }
  void Announce(const std::string& run, int64_t seq) {
    ASSERT_TRUE(notifier_.Notify(store::kEventsChannel, absl::StrCat(run, " ", seq)).ok());
  }
  testing::FakeNotifier notifier_;
  std::unique_ptr<EventLog> follower_;
};

TEST_F(EventLogFollowTest, AFollowerOfAnotherLogsRunIsWokenByItsNotificationAtOnce) {
  EXPECT_EQ(notifier_.subscribers(), 1u);
  Outcome wait;
  follower_->Wait("r", 0, absl::Seconds(15), wait.cb());
  EXPECT_FALSE(wait.fired());
  const int64_t last = Produce("r", 3);
  EXPECT_FALSE(wait.fired()) << "no notification yet, no poll yet";
  Announce("other", 9);
  EXPECT_FALSE(wait.fired()) << "another run's notification";
  Announce("r", last);
  EXPECT_EQ(wait.result.load(), static_cast<int>(EventLog::WaitResult::kReady));
  EXPECT_EQ(ReadAll(*follower_, "r", 2), OneTo(3));
  // A notification the follower is not behind does not wake it.
  Outcome caught_up;
  follower_->Wait("r", last, absl::Seconds(15), caught_up.cb());
  Announce("r", last);
  EXPECT_FALSE(caught_up.fired());
  follower_.reset();
  EXPECT_EQ(notifier_.subscribers(), 0u) << "the log unsubscribes when it goes";
}

// The notification is lost: the poll finds the event exactly one interval after the wait
// began, not a nanosecond before; and the wait still times out at its own deadline.
TEST_F(EventLogFollowTest, ALostNotificationIsCoveredByThePollExactlyAtItsInterval) {
  Outcome wait;
  follower_->Wait("r", 0, absl::Seconds(15), wait.cb());
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  Produce("r", 1);
  clock_.Advance(kPoll - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_FALSE(wait.fired()) << "polled before its interval";
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_EQ(wait.result.load(), static_cast<int>(EventLog::WaitResult::kReady));

  // Nothing new: every poll finds nothing, and the heartbeat comes at its deadline.
  Outcome idle;
  follower_->Wait("r", 1, absl::Seconds(2), idle.cb());
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kPoll);
    ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  }
  EXPECT_FALSE(idle.fired());
  clock_.Advance(kPoll - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_FALSE(idle.fired());
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_TRUE(idle.timed_out());
}

// The notifier listens again after a gap (its empty payload): the follower reads the store
// at once instead of at its next poll.
TEST_F(EventLogFollowTest, AfterTheNotifierListensAgainEveryFollowerLooksAtTheStoreAtOnce) {
  Outcome wait;
  follower_->Wait("r", 0, absl::Seconds(15), wait.cb());
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  Produce("r", 1);  // its notification was lost in the gap
  ASSERT_TRUE(notifier_.Notify(store::kEventsChannel, "").ok());
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_EQ(wait.result.load(), static_cast<int>(EventLog::WaitResult::kReady));
}

// A follower's wait must not leave a stale committed seq behind: the log that later appends
// to the run (a replica failing another's run) continues its seqs, and a new wait sees the
// events stored meanwhile.
TEST_F(EventLogFollowTest, FollowingARunCachesNothingThatGoesStale) {
  Outcome first;
  follower_->Wait("r", 0, absl::Seconds(1), first.cb());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  ASSERT_TRUE(first.timed_out());
  Produce("r", 3);
  Outcome second;
  follower_->Wait("r", 0, absl::Seconds(1), second.cb());
  EXPECT_EQ(second.result.load(), static_cast<int>(EventLog::WaitResult::kReady))
      << "the store has 3 events past 0";
  auto appended = follower_->Append(Ev("r"));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->seq(), 4);
}

// A run this log appended for a while and then forgot (a waiting run another replica
// claimed): the other log's events reach this log's readers and followers, where before the
// release they were answered from a tail and a seq that no longer moved.
TEST_F(EventLogFollowTest, AForgottenRunIsFollowedFromTheStoreAsAnotherLogAppendsIt) {
  ASSERT_EQ(follower_->Append(Ev("r"))->seq(), 1);  // run.queued, say, where it was queued
  ASSERT_TRUE(follower_->Flush("r").ok());
  Outcome woken;
  follower_->Wait("r", 1, absl::Seconds(15), woken.cb());
  EXPECT_EQ(Produce("r", 2), 3) << "the claimer goes on after seq 1";
  EXPECT_FALSE(woken.fired()) << "still answered from this log's cache";
  follower_->Forget("r");
  ASSERT_TRUE(clock_.BlockUntilSettled(kBothTimers));
  EXPECT_EQ(woken.result.load(), static_cast<int>(EventLog::WaitResult::kReady))
      << "woken at once when forgotten, and answered by the store";
  EXPECT_EQ(ReadAll(*follower_, "r", 10), OneTo(3));
  Outcome later;
  follower_->Wait("r", 3, absl::Seconds(15), later.cb());
  Produce("r", 1);
  Announce("r", 4);
  EXPECT_EQ(later.result.load(), static_cast<int>(EventLog::WaitResult::kReady))
      << "woken by the claimer's notification, as any other process's run";
}

// A follower on the other log reads every event exactly once, in order, from seq 0 and from
// the middle, while the producer appends in bursts and each burst is announced.
TEST_F(EventLogFollowTest, EveryEventOnceInOrderWhileTheOtherLogAppends) {
  constexpr int kBursts = 30, kPerBurst = 10;
  auto follow = [&](int64_t after, std::vector<int64_t>* seen) {
    for (;;) {
      auto batch = follower_->Read("r", after, 7);
      ASSERT_TRUE(batch.ok()) << batch.status();
      for (const v1::Event& e : *batch) {
        seen->push_back(e.seq());
        after = e.seq();
        if (e.type() == "run.finished") return;
      }
      if (!batch->empty()) continue;
      absl::Notification woken;
      follower_->Wait("r", after, absl::Hours(1), [&](EventLog::WaitResult r) {
        EXPECT_EQ(r, EventLog::WaitResult::kReady);
        woken.Notify();
      });
      woken.WaitForNotification();
    }
  };
  std::vector<int64_t> from_start, from_middle;
  std::thread a([&] { follow(0, &from_start); });
  Produce("r", kPerBurst);
  Announce("r", kPerBurst);
  std::thread b([&] { follow(kPerBurst / 2, &from_middle); });
  for (int burst = 1; burst < kBursts; ++burst) Announce("r", Produce("r", kPerBurst));
  v1::Event fin = Ev("r");
  fin.set_type("run.finished");
  fin.mutable_run_finished();
  Announce("r", producer().Append(fin)->seq());
  a.join();
  b.join();
  const int total = kBursts * kPerBurst + 1;
  EXPECT_EQ(from_start, OneTo(total));
  const std::vector<int64_t> all = OneTo(total);
  EXPECT_EQ(from_middle, std::vector<int64_t>(all.begin() + kPerBurst / 2, all.end()));
}

}  // namespace
}  // namespace sandgate::core
