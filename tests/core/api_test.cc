// The parts of core::Api that decide before calling a manager: the operator role, the
// arguments it checks itself, and what a StreamEvents holds while it is open. (The calls it
// only forwards are covered by the managers' tests and the integration tests.)
#include "core/api.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/file_artifact_store.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

// No managers: each call below must answer before it would reach one.
Api NoManagers(std::function<void()> request_drain = nullptr) {
  ApiDeps deps;
  deps.request_drain = std::move(request_drain);
  return Api(std::move(deps));
}

TEST(ApiTest, DrainAndPurgeNeedTheOperatorRole) {
  Api api = NoManagers([] { ADD_FAILURE() << "a tenant started a drain"; });
  Caller tenant{"team-a", false};
  v1::DrainResponse drained;
  absl::Status st = api.Drain(tenant, v1::DrainRequest(), &drained);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(), "operator role")) << st;
  v1::PurgeResponse purged;
  EXPECT_EQ(api.Purge(tenant, v1::PurgeRequest(), &purged).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(ApiTest, PurgeRefusesANegativeAge) {
  Api api = NoManagers();
  v1::PurgeRequest req;
  req.mutable_older_than()->set_seconds(-1);
  v1::PurgeResponse purged;
  absl::Status st = api.Purge(Caller{"op", true}, req, &purged);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "older_than")) << st;
}

// StreamEvents' start on real managers: the session manager and the event log on a fake clock
// (their two timer threads wait on it), the run manager (only asked whose a log is) on real
// time.
class EventStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-api-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    artifacts_ = *store::FileArtifactStore::Open(dir_ + "/artifacts");
    events_ = std::make_unique<EventLog>(store_.get(), &clock_);
    sessions_ = std::make_unique<SessionManager>(SessionManagerDeps{
        &config_, store_.get(), &clock_, {{"local", &provider_}}, &budget_, events_.get()});
    RunManagerDeps rd;
    rd.config = &config_;
    rd.store = store_.get();
    rd.artifacts = artifacts_.get();
    rd.events = events_.get();
    rd.clock = Clock::Real();
    rd.providers["local"] = &provider_;
    rd.sessions = sessions_.get();
    rd.budget = &budget_;
    runs_ = std::make_unique<RunManager>(std::move(rd));
    ApiDeps deps;
    deps.runs = runs_.get();
    deps.sessions = sessions_.get();
    api_ = std::make_unique<Api>(std::move(deps));
  }
  void TearDown() override {
    api_.reset();
    runs_.reset();
    sessions_.reset();
    events_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  v1::Session Create(int idle_s, int life_s) {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(idle_s);
    req.mutable_sandbox()->mutable_max_lifetime()->set_seconds(life_s);
    absl::StatusOr<v1::Session> s = sessions_->Create(caller_, req, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Session();
  }
  static v1::StreamEventsRequest Follow(const std::string& id, bool follow = true) {
    v1::StreamEventsRequest req;
    req.set_run_id(id);
    req.set_follow(follow);
    return req;
  }
  // Moves the clock by `d` and lets the reaper and the log's timer act on it.
  void AdvanceAndSettle(absl::Duration d) {
    clock_.Advance(d);
    ASSERT_TRUE(clock_.BlockUntilSettled(2));
  }
  v1::Session Get(const std::string& id) { return *sessions_->Get(caller_, id); }

  std::string dir_;
  Config config_;
  testing::FakeClock clock_;
  Caller caller_{"team-a", false};
  testing::HostProvider provider_;
  SandboxBudget budget_{64};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::ArtifactStore> artifacts_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<RunManager> runs_;
  std::unique_ptr<Api> api_;
};

// DESIGN.md: a session is idle only when nothing is in flight, an open StreamEvents included.
// A follower of the session's own log holds it past idle_timeout; once it detaches, the idle
// clock starts: reaped idle_timeout later, not 1 ns before.
TEST_F(EventStreamTest, AFollowerOfASessionsLogKeepsItFromIdlingUntilItDetaches) {
  const absl::Duration idle = absl::Seconds(60);
  v1::Session s = Create(/*idle_s=*/60, /*life_s=*/600);
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> follower =
      api_->StartEventStream(caller_, Follow(s.id()));
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ(Get(s.id()).in_flight(), 1u) << "the open follow is in flight";

  AdvanceAndSettle(idle);
  EXPECT_EQ(Get(s.id()).status(), v1::SESSION_STATUS_ACTIVE) << "reaped under its follower";
  AdvanceAndSettle(absl::Minutes(3));  // max_lifetime is 10 min
  EXPECT_EQ(Get(s.id()).status(), v1::SESSION_STATUS_ACTIVE);

  follower->reset();  // the stream ends (or its caller goes away)
  EXPECT_EQ(Get(s.id()).in_flight(), 0u);
  AdvanceAndSettle(idle - absl::Nanoseconds(1));
  EXPECT_EQ(Get(s.id()).status(), v1::SESSION_STATUS_ACTIVE) << "reaped before its idle_timeout";
  AdvanceAndSettle(absl::Nanoseconds(1));
  v1::Session reaped = Get(s.id());
  EXPECT_EQ(reaped.status(), v1::SESSION_STATUS_EXPIRED) << "not reaped at its idle_timeout";
  EXPECT_TRUE(absl::StrContains(reaped.status_reason(), "idle_timeout")) << reaped.status_reason();
}

// Only a follow of a live session's own log holds anything; who may read which log is as
// before.
TEST_F(EventStreamTest, AReplayAnEndedSessionAndAnUnknownLogHoldNothing) {
  v1::Session s = Create(/*idle_s=*/60, /*life_s=*/600);
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> replay =
      api_->StartEventStream(caller_, Follow(s.id(), /*follow=*/false));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(*replay, nullptr);
  EXPECT_EQ(Get(s.id()).in_flight(), 0u);

  EXPECT_EQ(api_->StartEventStream(Caller{"team-b", false}, Follow(s.id())).status().code(),
            absl::StatusCode::kNotFound)
      << "another tenant's session";
  EXPECT_EQ(api_->StartEventStream(caller_, Follow("no-such-log")).status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(sessions_->Close(caller_, s.id(), "done").ok());
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> closed =
      api_->StartEventStream(caller_, Follow(s.id()));
  ASSERT_TRUE(closed.ok()) << "its log is still there to read: " << closed.status();
  EXPECT_EQ(*closed, nullptr);
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

// A replica without its lease (core/replica.h) answers before a manager would take the work.
TEST(ApiTest, ReplicaWithoutItsLeaseTakesNoNewRunsOrSessions) {
  ApiDeps deps;
  deps.can_take_work = [] {
    return absl::UnavailableError("replica a could not renew its lease; no new work");
  };
  Api api(std::move(deps));
  v1::RunAnalysisRequest run;
  v1::Run started;
  absl::Status st = api.RunAnalysis(Caller{"team-a", false}, &run, &started);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(st.message(), "could not renew its lease")) << st;
  v1::Session session;
  EXPECT_EQ(api.CreateSession(Caller{"team-a", false}, v1::CreateSessionRequest(), &session).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sandgate::core
