// PostgresNotifier on a real server (tests/fakes/postgres_server.h): LISTEN/NOTIFY delivery,
// the events' notifications sent by AppendEvents, and the reconnect after the server drops
// the listening connection.
#include "store/postgres_notifier.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/postgres_admission_store.h"
#include "store/postgres_store.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store {
namespace {

using sandgate::testing::PostgresServer;

// What a subscriber was given, in order; waits (bounded, for a failing test) for more.
class Inbox {
 public:
  Notifier::Callback Callback() {
    return [this](const std::string& channel, const std::string& payload) {
      absl::MutexLock lock(&mu_);
      got_.emplace_back(channel, payload);
    };
  }
  // Waits until `pred` holds over what was received; returns it.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    absl::MutexLock lock(&mu_);
    auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(got_); };
    return mu_.AwaitWithTimeout(absl::Condition(&holds), absl::Seconds(20));
  }
  // Waits until `n` notifications carry `payload`.
  bool WaitForPayload(const std::string& payload, size_t n = 1) {
    return WaitFor([&](const auto& got) {
      return static_cast<size_t>(std::count_if(
                 got.begin(), got.end(), [&](const auto& g) { return g.second == payload; })) >= n;
    });
  }
  std::vector<std::pair<std::string, std::string>> got() {
    absl::MutexLock lock(&mu_);
    return got_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> got_ ABSL_GUARDED_BY(mu_);
};

class PostgresNotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    options_.dsn = *dsn;
    auto store = PostgresStore::Open(options_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto notifier = PostgresNotifier::Start(options_, &store_->database());
    ASSERT_TRUE(notifier.ok()) << notifier.status();
    notifier_ = *std::move(notifier);
  }
  // Subscribes `inbox` and waits until the channel is listened to (its empty payload).
  void Listen(const std::string& channel, Inbox& inbox) {
    auto id = notifier_->Subscribe(channel, inbox.Callback());
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(inbox.WaitForPayload(""));
  }
  static v1::Event Event(const std::string& run, int64_t seq) {
    v1::Event e;
    e.set_run_id(run);
    e.set_seq(seq);
    e.set_type("run.log");
    return e;
  }

  PostgresOptions options_;
  std::unique_ptr<PostgresStore> store_;
  std::unique_ptr<PostgresNotifier> notifier_;
};

TEST_F(PostgresNotifierTest, ANotificationReachesTheChannelsSubscribersOnly) {
  Inbox mine, other;
  Listen("test_mine", mine);
  Listen("test_other", other);
  ASSERT_TRUE(notifier_->Notify("test_mine", "hello").ok());
  ASSERT_TRUE(mine.WaitForPayload("hello"));
  ASSERT_TRUE(notifier_->Notify("test_other", "x").ok());
  ASSERT_TRUE(other.WaitForPayload("x"));
  for (const auto& [channel, payload] : mine.got()) EXPECT_EQ(channel, "test_mine");
}

TEST_F(PostgresNotifierTest, AppendEventsNotifiesEachRunOnceWithItsLastSeq) {
  Inbox inbox;
  Listen(kEventsChannel, inbox);
  ASSERT_TRUE(store_
                  ->AppendEvents(
                      {Event("run_a", 1), Event("run_a", 2), Event("run_b", 1), Event("run_a", 3)})
                  .ok());
  ASSERT_TRUE(inbox.WaitForPayload("run_a 3"));
  ASSERT_TRUE(inbox.WaitForPayload("run_b 1"));
  // A marker after them: anything else the batch sent has arrived by then.
  ASSERT_TRUE(notifier_->Notify(kEventsChannel, "marker").ok());
  ASSERT_TRUE(inbox.WaitForPayload("marker"));
  std::vector<std::string> payloads;
  for (const auto& g : inbox.got()) payloads.push_back(g.second);
  EXPECT_EQ(payloads, (std::vector<std::string>{"", "run_a 3", "run_b 1", "marker"}));
}

// A claim of a run another replica queued tells that replica (it lets go of the run at once);
// a replica claiming its own run tells nobody.
TEST_F(PostgresNotifierTest, AClaimOfAnotherReplicasRunTellsItsQueuer) {
  auto admission = PostgresAdmissionStore::Create(&store_->database());
  ASSERT_TRUE(admission.ok()) << admission.status();
  Inbox inbox;
  Listen(kQueueChannel, inbox);
  for (const char* id : {"r1", "r2"}) {
    QueuedRun run;
    run.run_id = id;
    run.tenant = "t";
    run.enqueued_by = "a";
    ASSERT_TRUE((*admission)->Enqueue(run, 0, {}).ok());
  }
  auto by_b = (*admission)->Claim("b", true);
  ASSERT_TRUE(by_b.ok() && by_b->has_value()) << by_b.status();
  ASSERT_TRUE(inbox.WaitForPayload(ClaimedFrom("a")));
  auto by_a = (*admission)->Claim("a", true);
  ASSERT_TRUE(by_a.ok() && by_a->has_value()) << by_a.status();
  ASSERT_TRUE(notifier_->Notify(kQueueChannel, "marker").ok());
  ASSERT_TRUE(inbox.WaitForPayload("marker"));
  size_t claims = 0;
  for (const auto& g : inbox.got()) claims += absl::StartsWith(g.second, "claimed-from");
  EXPECT_EQ(claims, 1u) << "a's claim of its own run is no news";
}

TEST_F(PostgresNotifierTest, NothingIsSentForARolledBackTransaction) {
  Inbox inbox;
  Listen("test_tx", inbox);
  auto conn = store_->database().Acquire("test");
  ASSERT_TRUE(conn.ok());
  absl::Status st = (*conn)->Transaction("test", [&]() -> absl::Status {
    absl::Status sent = PgNotify(**conn, "test_tx", "rolled back");
    EXPECT_TRUE(sent.ok()) << sent;
    return absl::InternalError("the body fails");
  });
  EXPECT_FALSE(st.ok());
  ASSERT_TRUE(
      (*conn)->Transaction("test", [&] { return PgNotify(**conn, "test_tx", "kept"); }).ok());
  ASSERT_TRUE(inbox.WaitForPayload("kept"));
  for (const auto& g : inbox.got()) EXPECT_NE(g.second, "rolled back");
}

TEST_F(PostgresNotifierTest, ReconnectsAfterTheServerDropsItsConnectionAndSaysSo) {
  Inbox inbox;
  Listen(kEventsChannel, inbox);
  EXPECT_EQ(notifier_->connects(), 1);
  {
    auto conn = store_->database().Acquire("test");
    ASSERT_TRUE(conn.ok());
    auto killed = (*conn)->Exec("test",
                                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()");
    ASSERT_TRUE(killed.ok()) << killed.status();
    ASSERT_EQ(killed->Int(0, 0), 1);
  }
  // An event stored while nobody listens is not notified to this listener: the second empty
  // payload (listening again) is what tells the subscriber to read the table.
  ASSERT_TRUE(store_->AppendEvents({Event("run_gap", 1)}).ok());
  ASSERT_TRUE(inbox.WaitForPayload("", 2));
  EXPECT_EQ(notifier_->connects(), 2);
  ASSERT_TRUE(store_->AppendEvents({Event("run_gap", 2)}).ok());
  ASSERT_TRUE(inbox.WaitForPayload("run_gap 2"));
}

TEST_F(PostgresNotifierTest, ABadChannelOrPayloadIsRefusedNamingIt) {
  auto bad = notifier_->Subscribe("Bad-Channel", [](const std::string&, const std::string&) {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'Bad-Channel'"), std::string::npos) << bad.status();
  absl::Status big = notifier_->Notify("fine", std::string(Notifier::kMaxPayload + 1, 'x'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument) << big;
}

TEST_F(PostgresNotifierTest, AfterUnsubscribeNothingMoreArrives) {
  Inbox gone, stays;
  auto id = notifier_->Subscribe("test_unsub", gone.Callback());
  ASSERT_TRUE(id.ok());
  Listen("test_unsub", stays);
  ASSERT_TRUE(gone.WaitForPayload(""));
  notifier_->Unsubscribe(*id);
  ASSERT_TRUE(notifier_->Notify("test_unsub", "after").ok());
  ASSERT_TRUE(stays.WaitForPayload("after"));
  for (const auto& g : gone.got()) EXPECT_NE(g.second, "after");
}

}  // namespace
}  // namespace sandgate::store
