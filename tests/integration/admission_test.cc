// Admission across replicas: two real daemons on one PostgreSQL database (tests/fakes'
// throwaway server) share one run queue and the tenants' quotas. A tenant limited to 2
// concurrent runs never has more than 2 RUNNING in the whole gateway, whichever replica its
// runs were sent to; runs_per_minute and live_sessions count both replicas' work; a run
// waiting on a full replica is started by the other one; and the queue is fair across
// tenants in the whole gateway, not per replica.
#include <curl/curl.h>

#include <algorithm>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kLimited[] = "limited-token";  // concurrent_runs 2, runs_per_minute 8
constexpr char kRated[] = "rated-token";      // runs_per_minute 2, live_sessions 1
constexpr char kFirst[] = "first-token";      // no quotas
constexpr char kSecond[] = "second-token";    // no quotas

nlohmann::json Config(const std::string& dsn, const std::string& id, uint32_t uid_base,
                      uint32_t max_concurrent_runs) {
  return {{"store", {{"type", "postgres"}, {"dsn", dsn}}},
          {"replica", {{"id", id}, {"lease_seconds", 4}, {"renew_seconds", 1}}},
          {"max_concurrent_runs", max_concurrent_runs},
          {"tenants",
           {{{"name", "limited"},
             {"token_sha256", Sha256::Hex(kLimited)},
             {"quotas", {{"concurrent_runs", 2}, {"runs_per_minute", 8}}}},
            {{"name", "rated"},
             {"token_sha256", Sha256::Hex(kRated)},
             {"quotas", {{"runs_per_minute", 2}, {"live_sessions", 1}}}},
            {{"name", "first"}, {"token_sha256", Sha256::Hex(kFirst)}},
            {{"name", "second"}, {"token_sha256", Sha256::Hex(kSecond)}}}},
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

class AdmissionAcrossReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    a_ = std::make_unique<DaemonHarness>(Config(*dsn, "replica-a", 305000, MaxConcurrentRuns()));
    b_ = std::make_unique<DaemonHarness>(Config(*dsn, "replica-b", 305100, MaxConcurrentRuns()));
    a_->Start();
    b_->Start();
  }
  virtual uint32_t MaxConcurrentRuns() const { return 4; }
  void TearDown() override {
    EXPECT_EQ(a_->Stop(SIGTERM), 0) << a_->Log();
    EXPECT_EQ(b_->Stop(SIGTERM), 0) << b_->Log();
  }
  grpc::Status Start(DaemonHarness& d, const std::string& token, v1::Run* run,
                     const std::string& setup = "") {
    v1::RunAnalysisRequest req = SampleRequest();
    if (!setup.empty()) req.mutable_sandbox()->add_setup_commands(setup);
    return d.Stub()->RunAnalysis(DaemonHarness::Context(token).get(), req, run);
  }
  // The tenant's runs as replica `d` lists them (from the shared store).
  std::vector<v1::Run> List(DaemonHarness& d, const std::string& token) {
    v1::ListRunsRequest req;
    req.set_page_size(100);
    v1::ListRunsResponse resp;
    grpc::Status st = d.Stub()->ListRuns(DaemonHarness::Context(token).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.runs().begin(), resp.runs().end()};
  }
  std::unique_ptr<DaemonHarness> a_, b_;
};

TEST_F(AdmissionAcrossReplicasTest, ATenantsConcurrentRunsHoldInTheWholeGateway) {
  // Six overlapping runs, three sent to each replica: each replica alone has room for 4.
  std::vector<v1::Run> runs(6);
  for (size_t i = 0; i < runs.size(); ++i) {
    grpc::Status st = Start(i % 2 ? *b_ : *a_, kLimited, &runs[i], "sleep 1");
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  // Sampled on both replicas until every run has ended (a follower on one replica is not
  // woken by the other's events yet: the store is read instead).
  int most = 0;
  std::vector<v1::Run> ended;
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  while (ended.size() < runs.size() && absl::Now() < give_up) {
    for (DaemonHarness* d : {a_.get(), b_.get()}) {
      int running = 0;
      ended.clear();
      for (const v1::Run& r : List(*d, kLimited)) {
        running += r.status() == v1::RUN_STATUS_RUNNING;
        if (r.has_finished_at()) ended.push_back(r);
      }
      most = std::max(most, running);
    }
  }
  ASSERT_EQ(ended.size(), runs.size()) << a_->Log() << b_->Log();
  std::set<std::string> replicas;
  for (const v1::Run& run : ended) {
    EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED) << run.status_reason();
    replicas.insert(run.replica());
  }
  EXPECT_LE(most, 2) << "never more than concurrent_runs RUNNING across both replicas";
  EXPECT_EQ(most, 2) << "the runs did overlap";
  EXPECT_EQ(replicas.size(), 2u) << "both replicas ran some";
}

TEST_F(AdmissionAcrossReplicasTest, RunsPerMinuteAndLiveSessionsCountBothReplicas) {
  v1::Run run;
  ASSERT_TRUE(Start(*a_, kRated, &run).ok());
  ASSERT_TRUE(Start(*b_, kRated, &run).ok());
  grpc::Status third = Start(*a_, kRated, &run);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(third.error_message(), "quota runs_per_minute (2) of tenant rated"))
      << third.error_message();

  v1::CreateSessionRequest create;
  v1::Session s;
  ASSERT_TRUE(a_->Stub()->CreateSession(DaemonHarness::Context(kRated).get(), create, &s).ok());
  v1::Session other;
  grpc::Status st = b_->Stub()->CreateSession(DaemonHarness::Context(kRated).get(), create, &other);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "quota live_sessions (1) of tenant rated"))
      << st.error_message();
  v1::CloseSessionRequest close;
  close.set_session_id(s.id());
  v1::Session closed;
  ASSERT_TRUE(a_->Stub()->CloseSession(DaemonHarness::Context(kRated).get(), close, &closed).ok());
  st = b_->Stub()->CreateSession(DaemonHarness::Context(kRated).get(), create, &other);
  EXPECT_TRUE(st.ok()) << "the slot is free once the session on A closed: " << st.error_message();
  close.set_session_id(other.id());
  EXPECT_TRUE(b_->Stub()->CloseSession(DaemonHarness::Context(kRated).get(), close, &closed).ok());
}

// The same two replicas with room for one run each: a gateway of two slots.
class FairQueueAcrossReplicasTest : public AdmissionAcrossReplicasTest {
 protected:
  uint32_t MaxConcurrentRuns() const override { return 1; }
};

// Tenant `second` fills both slots and queues two more, then `first` queues two: as the slots
// free, the gateway alternates between the tenants (round robin from the tenant claimed
// last), where one queue in arrival order would run both of `second`'s first.
TEST_F(FairQueueAcrossReplicasTest, WaitingRunsStartRoundRobinAcrossTenantsInTheWholeGateway) {
  struct Sent {
    DaemonHarness* replica;
    const char* token;
    v1::Run run;
  };
  std::vector<Sent> blockers = {{a_.get(), kSecond, {}}, {b_.get(), kSecond, {}}};
  for (Sent& s : blockers) {
    ASSERT_TRUE(Start(*s.replica, s.token, &s.run, "sleep 2").ok());
    EXPECT_EQ(s.run.replica(), s.replica == a_.get() ? "replica-a" : "replica-b")
        << "a replica with room starts the run it is sent";
  }
  std::vector<Sent> waiting = {{a_.get(), kSecond, {}},
                               {b_.get(), kSecond, {}},
                               {a_.get(), kFirst, {}},
                               {b_.get(), kFirst, {}}};
  for (Sent& s : waiting) {
    ASSERT_TRUE(Start(*s.replica, s.token, &s.run).ok());
    EXPECT_EQ(s.run.status(), v1::RUN_STATUS_QUEUED) << "both slots are taken";
  }
  std::vector<std::pair<std::pair<int64_t, int32_t>, std::string>> started;  // (started_at, tenant)
  for (Sent& s : waiting) {
    std::vector<v1::Event> events = FollowToEnd(*s.replica->Stub(), s.run.id(), s.token);
    ASSERT_FALSE(events.empty());
    ASSERT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
        << events.back().run_finished().reason();
    v1::GetRunRequest get;
    get.set_run_id(s.run.id());
    v1::Run run;
    ASSERT_TRUE(s.replica->Stub()->GetRun(DaemonHarness::Context(s.token).get(), get, &run).ok());
    started.push_back({{run.started_at().seconds(), run.started_at().nanos()}, run.tenant()});
  }
  std::sort(started.begin(), started.end());
  // Two slots free at about the same time, on two machines: the two runs started then may be
  // stamped in either order, so each pair is compared as a set.
  const std::multiset<std::string> one_each = {"first", "second"};
  EXPECT_EQ((std::multiset<std::string>{started[0].second, started[1].second}), one_each)
      << "the first two to start; arrival order would be second, second";
  EXPECT_EQ((std::multiset<std::string>{started[2].second, started[3].second}), one_each)
      << "the last two to start; arrival order would be first, first";
}

// Replica a has one run slot and looks at the queue only once a minute, so it notices a claim
// of a run it queued only when told; replica b has one slot, free.
class CancelAcrossReplicasTest : public AdmissionAcrossReplicasTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    nlohmann::json a = Config(*dsn, "replica-a", 305200, 1);
    nlohmann::json b = Config(*dsn, "replica-b", 305300, 1);
    a["replica"]["claim_poll_ms"] = 60000;
    a["http_listen"] = "127.0.0.1:0";    // the REST face forwards the cancel as gRPC does
    a["allow_plaintext_tokens"] = true;  // loopback
    // Calls on a run the other replica owns are forwarded there, over its Unix socket.
    for (nlohmann::json* c : {&a, &b}) (*c)["replica"]["advertise_address"] = "self";
    a_ = std::make_unique<DaemonHarness>(a);
    b_ = std::make_unique<DaemonHarness>(b);
    a_->Start();
    b_->Start();
  }
  v1::Run Get(DaemonHarness& d, const std::string& id) {
    v1::GetRunRequest get;
    get.set_run_id(id);
    v1::Run run;
    grpc::Status st = d.Stub()->GetRun(DaemonHarness::Context(kFirst).get(), get, &run);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return run;
  }
  // POST /v1/runs/{id}:cancel on a's REST port; the HTTP status.
  long CancelOverRest(const std::string& id) {
    const std::string log = a_->Log();
    const size_t at = log.find("\"event\":\"daemon.http\"");
    const size_t url = log.find("\"url\":\"", at);
    EXPECT_NE(at, std::string::npos) << log;
    if (at == std::string::npos || url == std::string::npos) return 0;
    const std::string base = log.substr(url + 7, log.find('"', url + 7) - url - 7);
    CURL* curl = curl_easy_init();
    const std::string target = base + "/v1/runs/" + id + ":cancel";
    curl_slist* headers =
        curl_slist_append(nullptr, absl::StrCat("Authorization: Bearer ", kFirst).c_str());
    curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void*) { return size * n; });
    long status = 0;
    EXPECT_EQ(curl_easy_perform(curl), CURLE_OK) << target;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return status;
  }
  grpc::Status Cancel(DaemonHarness& d, const std::string& id) {
    v1::CancelRunRequest req;
    req.set_run_id(id);
    v1::Run run;
    return d.Stub()->CancelRun(DaemonHarness::Context(kFirst).get(), req, &run);
  }
  // The run's log ends CANCELLED, with one run.finished and no run.started when `never_ran`.
  void ExpectCancelledOnce(const std::string& id, bool never_ran) {
    std::vector<v1::Event> events = FollowToEnd(*b_->Stub(), id, kFirst);
    ASSERT_FALSE(events.empty());
    int finished = 0, started = 0;
    for (const v1::Event& e : events) {
      finished += e.type() == "run.finished";
      started += e.type() == "run.started";
    }
    EXPECT_EQ(finished, 1);
    EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_CANCELLED)
        << events.back().run_finished().reason() << a_->Log() << b_->Log();
    if (never_ran) {
      EXPECT_EQ(started, 0);
    }
  }
};

// A cancel sent to the replica that queued a run reaches the replica that claimed it (before,
// the queuer, still holding the run as its own, answered and dropped it: the run ran on); a
// cancel of a run still waiting in the shared queue, sent to either replica, takes it out and
// ends it CANCELLED once.
TEST_F(CancelAcrossReplicasTest,
       CancelRunReachesTheReplicaThatClaimedTheRunOrTakesItOutOfTheQueue) {
  v1::Run blocker_a, moved;
  ASSERT_TRUE(Start(*a_, kFirst, &blocker_a, "sleep 30").ok());
  ASSERT_TRUE(Start(*a_, kFirst, &moved, "sleep 30").ok());
  EXPECT_EQ(moved.status(), v1::RUN_STATUS_QUEUED) << "a's one slot is taken";
  ASSERT_TRUE(Eventually(
      "b to claim and start the run a queued",
      [&] {
        v1::Run r = Get(*b_, moved.id());
        return r.status() == v1::RUN_STATUS_RUNNING && r.replica() == "replica-b";
      },
      absl::Seconds(10)));
  grpc::Status st = Cancel(*a_, moved.id());
  ASSERT_TRUE(st.ok()) << st.error_message();
  ExpectCancelledOnce(moved.id(), /*never_ran=*/false);

  // The same over REST: a's slot still taken, b's free again.
  v1::Run moved_rest;
  ASSERT_TRUE(Start(*a_, kFirst, &moved_rest, "sleep 30").ok());
  ASSERT_TRUE(Eventually(
      "b to claim and start the second run a queued",
      [&] {
        v1::Run r = Get(*b_, moved_rest.id());
        return r.status() == v1::RUN_STATUS_RUNNING && r.replica() == "replica-b";
      },
      absl::Seconds(10)));
  EXPECT_EQ(CancelOverRest(moved_rest.id()), 200);
  ExpectCancelledOnce(moved_rest.id(), /*never_ran=*/false);

  // Both slots taken: a run queued on a waits; cancelled through b, it leaves the queue.
  v1::Run blocker_b, waiting;
  ASSERT_TRUE(Start(*b_, kFirst, &blocker_b, "sleep 30").ok());
  ASSERT_TRUE(Start(*a_, kFirst, &waiting, "sleep 30").ok());
  EXPECT_EQ(waiting.status(), v1::RUN_STATUS_QUEUED);
  st = Cancel(*b_, waiting.id());
  ASSERT_TRUE(st.ok()) << st.error_message();
  ExpectCancelledOnce(waiting.id(), /*never_ran=*/true);
  for (const v1::Run* r : {&blocker_a, &blocker_b}) {
    ASSERT_TRUE(Cancel(r->replica() == "replica-a" ? *a_ : *b_, r->id()).ok());
  }
}

}  // namespace
}  // namespace sandgate::testing
