// RunManager against the host fake provider: the life of a run without bubblewrap.
#include "core/run_manager.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/reference_agent.h"
#include "common/events.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "store/file_artifact_store.h"
#include "store/sqlite_admission_store.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_store.h"
#include "tests/common/eventually.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/forwarding_store.h"
#include "tests/fakes/host_sandbox.h"
#include "tests/fakes/largest_allocation.h"

namespace sandgate::core {
namespace {

using testing::Eventually;
using testing::HostProvider;

TenantConfig Tenant(const std::string& name) {
  TenantConfig t;
  t.name = name;
  t.token_sha256 = std::string(64, name[name.size() - 1]);
  return t;
}

std::string ReadData(const std::string& rel) {
  std::ifstream in(std::string(SANDGATE_SOURCE_DIR) + "/tests/data/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An agent that writes the artifacts itself, with one metric wrong: verification must fail.
class TamperingAgent : public agent::Agent {
 public:
  std::string name() const override { return "tamper"; }
  absl::Status Run(const agent::AgentTask& task, sandbox::Session& session,
                   agent::EventSink& events, const CancelToken& cancel) override {
    agent::ReferenceAgent ref;
    absl::Status st = ref.Run(task, session, events, cancel);
    if (!st.ok()) return st;
    auto metrics = session.ReadFile("calculated_metrics.csv", 1 << 20);
    if (!metrics.ok()) return metrics.status();
    std::string m = *metrics;
    size_t at = m.find("\n2025,");
    m.replace(at + 6, 1, m[at + 6] == '9' ? "1" : "9");  // revenue_growth's first digit
    return session.WriteFile("calculated_metrics.csv", m);
  }
};

// A provider whose sweeps cannot tell until `ready` (an upstream create that may still land).
class LateSweepProvider : public sandbox::Provider {
 public:
  explicit LateSweepProvider(ResourceJournal* journal) : journal_(journal) {}
  std::string name() const override { return "late"; }
  absl::StatusOr<std::unique_ptr<sandbox::Session>> Create(const sandbox::SessionSpec&,
                                                           const CancelToken*) override {
    return absl::UnimplementedError("sweeps only");
  }
  absl::Status Sweep(const JournalEntry& entry) override {
    ++sweeps;
    if (!ready.load()) return absl::UnavailableError("may still land");
    return journal_->Erase(entry.id);
  }
  std::atomic<bool> ready{false};
  std::atomic<int> sweeps{0};

 private:
  ResourceJournal* const journal_;
};

// Plays one refused connection through the session's proxy callback, as a
// command would.
class ConnectingAgent : public agent::Agent {
 public:
  std::string name() const override { return "connect"; }
  absl::Status Run(const agent::AgentTask& task, sandbox::Session& session,
                   agent::EventSink& events, const CancelToken& cancel) override {
    sandbox::NetworkDecision d;
    d.connection = 1;
    d.verdict = sandbox::NetworkDecision::Verdict::kDenied;
    d.host = "127.0.0.2";
    d.reason = "blocked-by-ssrf-guard";
    if (provider == nullptr || !provider->Decide(session.id(), d)) {
      return absl::FailedPreconditionError("the sandbox has no decision callback");
    }
    return absl::OkStatus();
  }
  HostProvider* provider = nullptr;
};

// Runs until cancelled, or until the test lets it go when `ignore_cancel`.
class BlockingAgent : public agent::Agent {
 public:
  std::string name() const override { return "block"; }  // or "block2": same, for a second run
  absl::Status Run(const agent::AgentTask&, sandbox::Session&, agent::EventSink&,
                   const CancelToken& cancel) override {
    token.store(&cancel);
    started.Notify();
    while (ignore_cancel ? !release.HasBeenNotified() : !cancel.cancelled()) {
      cancel.WaitFor(absl::Milliseconds(1));
      if (ignore_cancel) release.WaitForNotificationWithTimeout(absl::Milliseconds(1));
    }
    return absl::CancelledError(cancel.reason());
  }
  absl::Notification started, release;
  std::atomic<const CancelToken*> token{nullptr};  // valid while the run is active
  bool ignore_cancel = false;
};

class RunManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-rm-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    artifacts_ = *store::FileArtifactStore::Open(dir_ + "/artifacts");
    events_ = std::make_unique<EventLog>(store_.get(), Clock::Real());
    provider_ = std::make_unique<HostProvider>(store_.get());
    config_.max_concurrent_runs = 2;
    Rebuild();
  }
  // `extra`, if given, is offered beside the local provider.
  void Rebuild(sandbox::Provider* extra = nullptr) {
    runs_.reset();
    sessions_.reset();
    RunManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.artifacts = artifacts_.get();
    deps.events = events_.get();
    deps.clock = clock_;
    deps.providers["local"] = provider_.get();
    if (extra != nullptr) deps.providers[extra->name()] = extra;
    deps.agents["reference"] = &reference_;
    deps.agents["tamper"] = &tamper_;
    connect_.provider = provider_.get();
    deps.agents["connect"] = &connect_;
    deps.agents["block"] = &block_;
    deps.agents["block2"] = &block2_;
    sessions_ = std::make_unique<SessionManager>(SessionManagerDeps{&config_,
                                                                    store_.get(),
                                                                    Clock::Real(),
                                                                    {{"local", provider_.get()}},
                                                                    &budget_,
                                                                    events_.get(),
                                                                    &metrics_});
    deps.metrics = &metrics_;
    deps.sessions = sessions_.get();
    deps.budget = &budget_;
    deps.admission = admission_;
    runs_ = std::make_unique<RunManager>(std::move(deps));
  }
  void TearDown() override {
    runs_.reset();
    sessions_.reset();
    events_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  static v1::RunAnalysisRequest Sample() {
    v1::RunAnalysisRequest req;
    auto* in = req.add_inputs();
    in->set_name("northstar_cloud_financial_statements.csv");
    in->set_content(ReadData("northstar_cloud_financial_statements.csv"));
    return req;
  }
  // The run once its pipeline thread has finished it (at most 30 s).
  v1::Run WaitFinished(const std::string& id, const Caller* as = nullptr) {
    v1::Run run;
    // The record is final just before run.finished is appended: wait for both.
    EXPECT_TRUE(Eventually(
        absl::StrCat("run ", id, " to finish"),
        [&] {
          absl::StatusOr<v1::Run> got = runs_->Get(as ? *as : caller_, id);
          if (!got.ok()) return false;
          run = *std::move(got);
          return run.status() >= v1::RUN_STATUS_SUCCEEDED && LastEventIsTerminal(id);
        },
        absl::Seconds(30)));
    return run;
  }
  std::vector<v1::Event> Events(const std::string& id) { return *events_->Read(id, 0, 10000); }
  // The run once run.finished is in its log, woken by the log (no polling), at most 10 s.
  v1::Run FollowToFinish(const std::string& id) {
    int64_t seq = 0;
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (absl::Now() < give_up) {
      std::vector<v1::Event> events = *events_->Read(id, seq, 10000);
      for (const v1::Event& e : events) {
        if (e.type() == "run.finished") return *runs_->Get(caller_, id);
        seq = e.seq();
      }
      absl::Notification appended;
      events_->Wait(id, seq, give_up - absl::Now(),
                    [&](EventLog::WaitResult) { appended.Notify(); });
      appended.WaitForNotification();
    }
    ADD_FAILURE() << "run did not finish";
    return v1::Run();
  }
  // On fake_: starts a run with `agent` (named `name`) and `timeout_s` (0: the default) and
  // returns its id once the agent runs and the timers (watchdog, retention) wait again.
  std::string StartBlocked(BlockingAgent& agent, const std::string& name, int64_t timeout_s) {
    v1::RunAnalysisRequest req = Sample();
    req.set_agent(name);
    if (timeout_s > 0) req.mutable_run_timeout()->set_seconds(timeout_s);
    absl::StatusOr<v1::Run> started = runs_->Start(caller_, req);
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return "";
    }
    agent.started.WaitForNotification();
    EXPECT_TRUE(fake_.BlockUntilSettled(2));
    return started->id();
  }
  // Until the run's first command has started (at most 5 s).
  void WaitForFirstCommand(const std::string& id) {
    EXPECT_TRUE(Eventually(
        absl::StrCat("run ", id, "'s first command.started"),
        [&] {
          for (const auto& e : Events(id)) {
            if (e.has_command_started()) return true;
          }
          return false;
        },
        absl::Seconds(5)));
  }
  bool LastEventIsTerminal(const std::string& id) {
    std::vector<v1::Event> events = Events(id);
    return !events.empty() && events.back().type() == "run.finished";
  }

  std::string dir_;
  testing::FakeClock fake_;
  Clock* clock_ =
      Clock::Real();  // the run manager's (or &fake_); sessions and events use real time
  Config config_;
  store::AdmissionStore* admission_ = nullptr;  // the shared queue's, if any; outlives runs_
  Caller caller_{"team-a", false};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::ArtifactStore> artifacts_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<HostProvider> provider_;
  agent::ReferenceAgent reference_;
  TamperingAgent tamper_;
  ConnectingAgent connect_;
  BlockingAgent block_, block2_;
  SandboxBudget budget_{16};
  Metrics metrics_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<RunManager> runs_;
};

TEST_F(RunManagerTest, SampleRunSucceedsVerifiedAndEndsWithOneTerminalEvent) {
  auto started = runs_->Start(caller_, Sample());
  ASSERT_TRUE(started.ok()) << started.status();
  v1::Run run = WaitFinished(started->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED) << run.status_reason();
  EXPECT_EQ(run.artifacts_size(), 6);
  EXPECT_GT(run.checks_size(), 10);
  for (const auto& c : run.checks()) EXPECT_TRUE(c.passed()) << c.name() << ": " << c.detail();
  auto events = Events(run.id());
  int terminal = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq(), static_cast<int64_t>(i + 1));
    if (events[i].type() == "run.finished") ++terminal;
  }
  EXPECT_EQ(terminal, 1);
  EXPECT_EQ(events.back().type(), "run.finished");
  EXPECT_EQ(run.last_seq(), events.back().seq());
  EXPECT_EQ(provider_->live_sessions(), 0);
  EXPECT_TRUE(store_->List()->empty()) << "the journal must be empty after the run";
}

// An input the verifier would fail whatever the agent did is refused before a run exists (no
// sandbox, no model call), naming the year.
TEST_F(RunManagerTest, FatalInputIsRefusedNamingTheYear) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_inputs(0)->set_name("dup.csv");
  req.mutable_inputs(0)->set_content(ReadData("financial/duplicate_year.csv"));
  absl::StatusOr<v1::Run> run = runs_->Start(caller_, req);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(run.status().message(), "inputs: input \"dup.csv\": "))
      << run.status();
  EXPECT_TRUE(absl::StrContains(run.status().message(), "duplicate year 2023")) << run.status();
  EXPECT_EQ(provider_->live_sessions(), 0);
}

// An artifact of tens of MiB goes from the sandbox to the store in bounded pieces: the
// daemon never holds it whole (here the agent fails, so nothing is read back to verify).
TEST_F(RunManagerTest, CollectingALargeArtifactHoldsOnlyABoundedPieceOfIt) {
  v1::RunAnalysisRequest req = Sample();
  // Left by setup, which also takes the input away: the analysis stops before it writes its own.
  req.mutable_sandbox()->add_setup_commands(
      "head -c 25165824 /dev/zero | tr '\\0' x > calculated_metrics.csv && rm " +
      req.inputs(0).name());
  v1::Run run;
  {
    testing::LargestAllocation probe;
    run = WaitFinished(runs_->Start(caller_, req)->id());
    EXPECT_LT(probe.bytes(), 4u << 20) << "an artifact was gathered whole in memory";
  }
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED) << run.status_reason();
  const v1::Artifact* big = nullptr;
  for (const auto& a : run.artifacts()) {
    if (a.name() == "calculated_metrics.csv") big = &a;
  }
  ASSERT_NE(big, nullptr) << "the large artifact was not collected";
  EXPECT_EQ(big->size_bytes(), 25165824u);
  EXPECT_EQ(big->sha256(), Sha256::Hex(std::string(25165824, 'x')));
}

TEST_F(RunManagerTest, TamperedArtifactFailsVerificationByCheckName) {
  v1::RunAnalysisRequest req = Sample();
  req.set_agent("tamper");
  v1::Run run = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(
      absl::StrContains(run.status_reason(), "verification failed: calculated_metrics.values"))
      << run.status_reason();
  auto events = Events(run.id());
  EXPECT_EQ(events.back().run_finished().failed_checks(0), "calculated_metrics.values");
}

TEST_F(RunManagerTest, CancelDuringACommandEndsCancelledAndClosesTheSession) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_setup_commands("sleep 30");
  auto started = runs_->Start(caller_, req);
  ASSERT_TRUE(started.ok());
  WaitForFirstCommand(started->id());
  ASSERT_TRUE(runs_->Cancel(caller_, started->id(), "enough").ok());
  v1::Run run = WaitFinished(started->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_EQ(run.status_reason(), "cancelled by the caller: enough");
  EXPECT_EQ(provider_->live_sessions(), 0);
  // Cancelling a finished run returns it unchanged.
  EXPECT_EQ(runs_->Cancel(caller_, run.id(), "")->status(), v1::RUN_STATUS_CANCELLED);
}

TEST_F(RunManagerTest, RunTimeoutEndsTimedOut) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_setup_commands("sleep 30");
  req.mutable_run_timeout()->set_seconds(1);
  v1::Run run = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_TIMED_OUT);
  EXPECT_EQ(run.status_reason(), "run timed out after 1s");
  EXPECT_EQ(provider_->live_sessions(), 0);
}

TEST_F(RunManagerTest, FailingSetupCommandStopsTheRunWithItsOutputInEvents) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_setup_commands("echo preparing; echo broken >&2; exit 3");
  v1::Run run = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(run.status_reason(), "sandbox.setup_commands[0] exited with status 3: broken");
  std::string output;
  for (const auto& e : Events(run.id())) {
    if (e.has_command_output()) output += e.command_output().data();
  }
  EXPECT_TRUE(absl::StrContains(output, "broken"));
}

TEST_F(RunManagerTest, ProviderFailureFailsTheRunSayingWhere) {
  provider_->FailNextCreate(absl::UnavailableError("no uids left"));
  v1::Run run = WaitFinished(runs_->Start(caller_, Sample())->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(run.status_reason(), "creating the sandbox: no uids left");
}

TEST_F(RunManagerTest, AnotherTenantsRunIsNotFound) {
  auto started = runs_->Start(caller_, Sample());
  Caller other{"team-b", false};
  EXPECT_EQ(runs_->Get(other, started->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(runs_->Cancel(other, started->id(), "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(runs_->List(other, 0, "")->runs.empty());
  Caller op{"ops", true};
  EXPECT_TRUE(runs_->Get(op, started->id()).ok()) << "operators see every run";
  WaitFinished(started->id());
}

TEST_F(RunManagerTest, RecoverFailsInterruptedRunsAndSweepsTheJournal) {
  v1::Run orphan;
  orphan.set_id("run-orphan");
  orphan.set_tenant("team-a");
  orphan.set_status(v1::RUN_STATUS_RUNNING);
  ASSERT_TRUE(store_->PutRun(orphan).ok());
  v1::Event e;
  e.set_run_id("run-orphan");
  e.set_type("run.started");
  ASSERT_TRUE(events_->Append(e).ok());
  ASSERT_TRUE(store_->Record({"host:s1", "local", "session", {}}).ok());
  ASSERT_TRUE(runs_->Recover(Tenants({Tenant("team-a")})).ok());
  auto run = runs_->Get(caller_, "run-orphan");
  EXPECT_EQ(run->status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(run->status_reason(), "interrupted"));
  auto events = Events("run-orphan");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].seq(), 2);
  EXPECT_EQ(events[1].type(), "run.finished");
  EXPECT_TRUE(store_->List()->empty());
}

TEST_F(RunManagerTest, DrainRefusesNewRunsAndCancelsActiveOnes) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_setup_commands("sleep 30");
  auto started = runs_->Start(caller_, req);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(runs_->Drain(absl::Seconds(20)), 0u);
  EXPECT_EQ(runs_->Get(caller_, started->id())->status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_EQ(runs_->Start(caller_, Sample()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(provider_->live_sessions(), 0);
}

// On the FakeClock: the watchdog and retention wait on it, and so does the sweeper's
// background round (JournalSweeper::kRound) while an entry is unsettled.
TEST_F(RunManagerTest, WhatASweepCannotTellYetIsAskedAgainInTheBackground) {
  clock_ = &fake_;
  LateSweepProvider late(store_.get());
  auto restart = [&] {
    Rebuild(&late);
    return runs_->Recover(Tenants({}));
  };
  ASSERT_TRUE(store_->Record({"late:c1", "late", "container", {}}).ok());
  ASSERT_TRUE(restart().ok()) << "returns without waiting for the sweep";
  EXPECT_EQ(store_->List()->size(), 1u);
  ASSERT_TRUE(fake_.BlockUntilSettled(3));
  EXPECT_EQ(late.sweeps.load(), 1);
  fake_.Advance(JournalSweeper::kRound - absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(3));
  EXPECT_EQ(late.sweeps.load(), 1) << "not asked again before a round has passed";
  fake_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(3));
  EXPECT_EQ(late.sweeps.load(), 2) << "asked again at the round";
  late.ready = true;
  fake_.Advance(JournalSweeper::kRound);
  // The round that settles it ends the sweeper's thread: only the two timers wait again.
  EXPECT_TRUE(Eventually("the settled entry to leave the journal",
                         [&] { return store_->List()->empty(); }));
  EXPECT_EQ(late.sweeps.load(), 3);

  // One that never settles is left for the next start when the daemon drains.
  late.ready = false;
  ASSERT_TRUE(store_->Record({"late:c2", "late", "container", {}}).ok());
  ASSERT_TRUE(restart().ok());
  EXPECT_EQ(runs_->Drain(absl::ZeroDuration()), 0u);
  EXPECT_EQ(store_->List()->size(), 1u);
  runs_.reset();
}

TEST_F(RunManagerTest, WaitingRunsInputsAreBoundedInBytes) {
  config_.max_concurrent_runs = 1;
  const uint64_t one = Sample().inputs(0).content().size();
  config_.max_queued_input_bytes = 2 * one;  // two waiting samples fit, a third does not
  Rebuild();
  v1::RunAnalysisRequest slow = Sample();
  slow.mutable_sandbox()->add_setup_commands("sleep 30");
  auto running = runs_->Start(caller_, slow);
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(Eventually("the first run to be admitted", [&] {
    return runs_->Get(caller_, running->id())->status() != v1::RUN_STATUS_QUEUED;
  }));
  auto first = runs_->Start(caller_, Sample());
  auto second = runs_->Start(caller_, Sample());
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = runs_->Start(caller_, Sample());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(third.status().message(), "max_queued_input_bytes"))
      << third.status();
  // Room comes back as soon as a waiting run leaves the queue, here by being cancelled.
  ASSERT_TRUE(runs_->Cancel(caller_, first->id(), "make room").ok());
  EXPECT_TRUE(runs_->Start(caller_, Sample()).ok());
}

// A waiting run's inputs are kept in the state database only, not also in memory (a full
// queue would hold max_queued_input_bytes): it reads them back when it starts. Here the kept
// copy is replaced while the run waits, and the run analyses what the store holds.
TEST_F(RunManagerTest, AWaitingRunHoldsItsInputsInTheStoreOnly) {
  config_.max_concurrent_runs = 1;
  Rebuild();
  // One run held in a 30 s setup, one waiting behind it; cancelling the first starts it.
  auto one_waiting = [&] {
    v1::RunAnalysisRequest slow = Sample();
    slow.mutable_sandbox()->add_setup_commands("sleep 30");
    auto running = runs_->Start(caller_, slow);
    auto waiting = runs_->Start(caller_, Sample());
    EXPECT_TRUE(running.ok() && waiting.ok());
    EXPECT_EQ(runs_->Get(caller_, waiting->id())->status(), v1::RUN_STATUS_QUEUED);
    return std::make_pair(running->id(), waiting->id());
  };
  auto [running, waiting] = one_waiting();
  v1::RunAnalysisRequest kept = *store_->GetRunRequest(waiting);
  kept.mutable_inputs(0)->set_content(ReadData("financial/duplicate_year.csv"));
  ASSERT_TRUE(store_->PutRunRequest(waiting, kept).ok());
  ASSERT_TRUE(runs_->Cancel(caller_, running, "make room").ok());
  v1::Run run = WaitFinished(waiting);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED) << "analysed an in-memory copy of the input";
  EXPECT_TRUE(absl::StrContains(run.status_reason(), "2023")) << run.status_reason();

  // Without its kept request it cannot start, and says why.
  auto [blocker, orphan] = one_waiting();
  v1::Run started = *runs_->Get(caller_, orphan);
  started.set_status(v1::RUN_STATUS_RUNNING);  // PutRun of a started run drops its request
  ASSERT_TRUE(store_->PutRun(started).ok());
  ASSERT_TRUE(runs_->Cancel(caller_, blocker, "make room").ok());
  run = WaitFinished(orphan);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(run.status_reason(), "reading the run's inputs back"))
      << run.status_reason();
}

TEST_F(RunManagerTest, AQueuedRunSurvivesARestartAndRunsAfterIt) {
  config_.max_concurrent_runs = 1;
  Rebuild();
  v1::RunAnalysisRequest slow = Sample();
  slow.mutable_sandbox()->add_setup_commands("sleep 30");
  auto running = runs_->Start(caller_, slow);
  ASSERT_TRUE(running.ok());
  auto queued = runs_->Start(caller_, Sample());
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->status(), v1::RUN_STATUS_QUEUED);

  runs_.reset();  // a drain: the running run is cancelled, the queued one stays queued
  EXPECT_EQ(store_->GetRun(running->id())->status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_EQ(store_->GetRun(queued->id())->status(), v1::RUN_STATUS_QUEUED);
  Rebuild();
  ASSERT_TRUE(runs_->Recover(Tenants({Tenant("team-a")})).ok());
  v1::Run done = WaitFinished(queued->id());
  EXPECT_EQ(done.status(), v1::RUN_STATUS_SUCCEEDED) << done.status_reason();
  EXPECT_EQ(done.created_at().seconds(), queued->created_at().seconds()) << "the same run";
  EXPECT_EQ(store_->GetRunRequest(queued->id()).status().code(), absl::StatusCode::kNotFound)
      << "the kept request goes when the run starts";

  std::vector<v1::Event> events = Events(queued->id());
  std::vector<std::string> notices;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq(), static_cast<int64_t>(i + 1)) << "dense across the restart";
    if (events[i].type() == "notice") notices.push_back(events[i].notice().message());
  }
  ASSERT_GE(notices.size(), 2u);
  EXPECT_TRUE(absl::StrContains(notices[0], "stays queued")) << notices[0];
  EXPECT_TRUE(absl::StrContains(notices[1], "queued again")) << notices[1];
  EXPECT_EQ(events.back().type(), "run.finished");
}

TEST_F(RunManagerTest, AQueuedRunThatCannotBeQueuedAgainFailsSayingWhy) {
  config_.max_concurrent_runs = 1;
  Rebuild();
  v1::RunAnalysisRequest slow = Sample();
  slow.mutable_sandbox()->add_setup_commands("sleep 30");
  ASSERT_TRUE(runs_->Start(caller_, slow).ok());
  auto gone = runs_->Start(caller_, Sample());
  Caller other{"team-b", false};
  auto refused = runs_->Start(other, Sample());
  ASSERT_TRUE(gone.ok() && refused.ok());
  runs_.reset();
  Rebuild();
  // team-a is no longer configured; team-b's policy now refuses the reference agent.
  TenantConfig b = Tenant("team-b");
  b.policy.agents = {"openai"};
  ASSERT_TRUE(runs_->Recover(Tenants({b})).ok());
  v1::Run a = WaitFinished(gone->id());
  EXPECT_EQ(a.status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(a.status_reason(), "tenant team-a is no longer configured"))
      << a.status_reason();
  v1::Run r = WaitFinished(refused->id(), &other);
  EXPECT_EQ(r.status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(r.status_reason(), "agent 'reference' is not allowed"))
      << r.status_reason();
}

TEST_F(RunManagerTest, IdempotencyKeyReturnsTheSameRunAlsoAfterARestart) {
  v1::RunAnalysisRequest req = Sample();
  req.set_idempotency_key("k1");
  auto first = runs_->Start(caller_, req);
  WaitFinished(first->id());
  Rebuild();
  auto again = runs_->Start(caller_, req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), first->id());
  EXPECT_EQ(provider_->created_sessions(), 1);
  // The same key from another tenant is another run.
  Caller team_b{"team-b", false};
  auto other = runs_->Start(team_b, req);
  EXPECT_NE(other->id(), first->id());
  WaitFinished(other->id(), &team_b);
}

// A key is bound to the request that used it first: another request under it is
// refused (FAILED_PRECONDITION naming the run), also after a restart; the same
// one still gets its run.
TEST_F(RunManagerTest, AnIdempotencyKeyReusedWithADifferentRequestIsRefused) {
  v1::RunAnalysisRequest req = Sample();
  req.set_idempotency_key("k1");
  auto first = runs_->Start(caller_, req);
  ASSERT_TRUE(first.ok()) << first.status();
  v1::RunAnalysisRequest other = req;
  other.mutable_inputs(0)->mutable_content()->append("2031,1,1,1,1,1,1,1,1,1,1,1,1,1\n");
  const std::string expected =
      absl::StrCat("idempotency_key 'k1' was used for a different request (", first->id(), ")");
  auto refused = runs_->Start(caller_, other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), expected)) << refused.status();
  WaitFinished(first->id());
  Rebuild();
  EXPECT_EQ(runs_->Start(caller_, other).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runs_->Start(caller_, req)->id(), first->id());
  EXPECT_EQ(provider_->created_sessions(), 1);
}

// Concurrent requests under one key: the insert decides, and the losers compare
// too.
TEST_F(RunManagerTest, RacingRequestsUnderOneKeyGetOneRunOrARefusal) {
  constexpr int kThreads = 6;
  std::vector<absl::StatusOr<v1::Run>> same(kThreads), different(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      v1::RunAnalysisRequest req = Sample();
      req.set_idempotency_key("same");
      same[i] = runs_->Start(caller_, req);
      req.set_idempotency_key("different");
      (*req.mutable_labels())["attempt"] = std::to_string(i);
      different[i] = runs_->Start(caller_, req);
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> ids;
  for (const auto& r : same) {
    ASSERT_TRUE(r.ok()) << r.status();
    ids.insert(r->id());
  }
  EXPECT_EQ(ids.size(), 1u) << "the same request under one key is one run";
  int won = 0;
  for (const auto& r : different) {
    if (r.ok()) {
      ++won;
      WaitFinished(r->id());
    } else {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    }
  }
  EXPECT_EQ(won, 1);
  WaitFinished(*ids.begin());
}

// Nothing of a bad request is stored, queued or made: it is refused at Start.
TEST_F(RunManagerTest, ABadRequestIsRefusedBeforeItIsQueued) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_files()->set_path("../../etc/x");
  auto bad = runs_->Start(caller_, req);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(),
                                "sandbox.files[0].path: '../../etc/x' must stay inside"))
      << bad.status();
  req = Sample();
  req.mutable_run_timeout()->set_seconds(10ll * 365 * 86400);
  EXPECT_TRUE(
      absl::StrContains(runs_->Start(caller_, req).status().message(), "run_timeout: at most 24h"));
  EXPECT_TRUE(store_->ListRuns("", 50, "")->runs.empty());
  EXPECT_EQ(provider_->created_sessions(), 0);
}

// A run in a kept session records the session's network decisions as a run of
// its own session does; the session's own log has them too.
TEST_F(RunManagerTest, ARunInAKeptSessionRecordsItsNetworkDecisions) {
  auto session = sessions_->Create(caller_, v1::CreateSessionRequest(), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  for (bool kept : {false, true}) {
    v1::RunAnalysisRequest req = Sample();
    req.set_agent("connect");
    if (kept) req.set_session_id(session->id());
    v1::Run run = WaitFinished(runs_->Start(caller_, req)->id());
    bool decided = false;
    for (const auto& e : Events(run.id()))
      decided |= e.has_network() && e.network().verdict() == "denied";
    EXPECT_TRUE(decided) << (kept ? "kept" : "own") << " session: " << run.status_reason();
  }
  EXPECT_TRUE(Eventually("a network.decision in the session's own log", [&] {
    bool in_session_log = false;  // appended off the proxy's thread
    for (const auto& e : Events(session->id())) in_session_log |= e.has_network();
    return in_session_log;
  }));
}

TEST_F(RunManagerTest, RunsInAKeptSessionLeaveItOpenForTheNext) {
  auto session = sessions_->Create(caller_, v1::CreateSessionRequest(), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::RunAnalysisRequest req = Sample();
  req.set_session_id(session->id());
  v1::Run first = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(first.status(), v1::RUN_STATUS_SUCCEEDED) << first.status_reason();
  EXPECT_EQ(first.session_id(), session->id());
  EXPECT_EQ(sessions_->Get(caller_, session->id())->status(), v1::SESSION_STATUS_ACTIVE);
  EXPECT_EQ(provider_->live_sessions(), 1);
  for (const auto& e : Events(first.id())) EXPECT_NE(e.type(), "session.closed");
  // The follow-up sees the first run's files.
  auto lease = sessions_->Acquire(caller_, session->id());
  EXPECT_TRUE((*lease)->session().ReadFile("calculated_metrics.csv", 1 << 20).ok());
  lease->reset();
  v1::Run second = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(second.status(), v1::RUN_STATUS_SUCCEEDED);

  req.mutable_sandbox()->set_memory_bytes(1 << 30);
  EXPECT_TRUE(
      absl::StrContains(runs_->Start(caller_, req).status().message(), "leave sandbox unset"));
  req.clear_sandbox();
  EXPECT_EQ(runs_->Start(Caller{"team-b", false}, req).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RunManagerTest, ClosingTheSessionCancelsTheRunInIt) {
  v1::CreateSessionRequest create;
  auto session = sessions_->Create(caller_, create, nullptr);
  ASSERT_TRUE(session.ok());
  v1::RunAnalysisRequest req = Sample();
  req.set_session_id(session->id());
  req.set_agent("tamper");  // any agent; closing happens during the analysis
  auto started = runs_->Start(caller_, req);
  ASSERT_TRUE(started.ok());
  WaitForFirstCommand(started->id());
  ASSERT_TRUE(sessions_->Close(caller_, session->id(), "enough").ok());
  v1::Run run = WaitFinished(started->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_TRUE(absl::StrContains(run.status_reason(), "closed by the caller: enough"))
      << run.status_reason();
  EXPECT_EQ(runs_->Start(caller_, req).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RunManagerTest, RetentionDeletesOldRunsWithTheirEventsAndArtifacts) {
  v1::Run done = WaitFinished(runs_->Start(caller_, Sample())->id());
  ASSERT_EQ(done.status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(*runs_->PurgeBefore(absl::Now() - absl::Hours(1)), 0u) << "not old enough";
  EXPECT_TRUE(runs_->Get(caller_, done.id()).ok());
  EXPECT_EQ(*runs_->PurgeBefore(absl::Now() + absl::Seconds(5)), 1u);
  EXPECT_EQ(runs_->Get(caller_, done.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Events(done.id()).empty());
  EXPECT_EQ(artifacts_->Read(done.id(), "calculated_metrics.csv", 0, 10).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RunManagerTest, ACommandPastItsTimeoutEndsTimedOutAndTheRunSaysSo) {
  v1::RunAnalysisRequest req = Sample();
  req.mutable_sandbox()->add_setup_commands("sleep 30");
  req.mutable_sandbox()->mutable_command_timeout()->set_seconds(1);
  v1::Run run = WaitFinished(runs_->Start(caller_, req)->id());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(run.status_reason(), "sandbox.setup_commands[0] timed out after 1s");
}

// The run timeout on a FakeClock: the watchdog (one waiter) and retention (one) wait on it.
TEST_F(RunManagerTest, TheRunTimeoutCancelsAtItsDeadlineNotBefore) {
  clock_ = &fake_;
  Rebuild();
  const std::string id = StartBlocked(block_, "block", 10);

  fake_.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));
  EXPECT_FALSE(block_.token.load()->cancelled()) << "not before the deadline";
  EXPECT_EQ(runs_->Get(caller_, id)->status(), v1::RUN_STATUS_RUNNING);

  fake_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));
  EXPECT_TRUE(block_.token.load()->cancelled()) << "at the deadline";
  v1::Run run = FollowToFinish(id);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_TIMED_OUT);
  EXPECT_EQ(run.status_reason(), "run timed out after 10s");
  EXPECT_EQ(provider_->live_sessions(), 0);
}

// A run that starts later with an earlier deadline is timed out at its own deadline: the
// watchdog does not sleep on to the deadline it was waiting for.
TEST_F(RunManagerTest, EachRunTimesOutAtItsOwnDeadlineAlsoWhenItStartsLater) {
  clock_ = &fake_;
  Rebuild();
  const std::string a = StartBlocked(block_, "block", 100);
  fake_.Advance(absl::Seconds(5));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));

  const std::string b = StartBlocked(block2_, "block2", 10);

  fake_.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));
  EXPECT_FALSE(block2_.token.load()->cancelled()) << "not before its deadline";
  fake_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));
  EXPECT_TRUE(block2_.token.load()->cancelled()) << "at its deadline";
  EXPECT_FALSE(block_.token.load()->cancelled()) << "the first run has 85 s left";
  EXPECT_EQ(FollowToFinish(b).status(), v1::RUN_STATUS_TIMED_OUT);

  fake_.Advance(absl::Seconds(85) - absl::Nanoseconds(1));
  ASSERT_TRUE(fake_.BlockUntilSettled(2));
  EXPECT_FALSE(block_.token.load()->cancelled());
  fake_.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(FollowToFinish(a).status(), v1::RUN_STATUS_TIMED_OUT);
}

// Drain waits for a running run up to its grace on the injected clock, and no longer.
TEST_F(RunManagerTest, DrainWaitsForRunningRunsUntilTheGraceIsOverNotBefore) {
  clock_ = &fake_;
  Rebuild();
  block_.ignore_cancel = true;
  const std::string id = StartBlocked(block_, "block", 0);

  std::atomic<bool> drained{false};
  size_t left = 0;
  std::thread drain([&] {
    left = runs_->Drain(absl::Seconds(30));
    drained = true;
  });
  // EXPECT, not ASSERT: the drain thread is joined below whatever happens.
  EXPECT_TRUE(fake_.BlockUntilSettled(3)) << "the drain waits on the clock";
  fake_.Advance(absl::Seconds(30) - absl::Nanoseconds(1));
  EXPECT_TRUE(fake_.BlockUntilSettled(3));
  EXPECT_FALSE(drained.load()) << "not before the grace is over";
  fake_.Advance(absl::Nanoseconds(1));
  drain.join();
  EXPECT_EQ(left, 1u) << "the run that ignores its cancel is still active";
  block_.release.Notify();
  EXPECT_EQ(FollowToFinish(id).status(), v1::RUN_STATUS_CANCELLED);
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

// Holds the first batch holding an event `hold` picks until `release`, so a test acts while
// that event is appended but not committed.
class HoldingStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void Arm(std::function<bool(const v1::Event&)> hold) {
    absl::MutexLock lock(&mu_);
    hold_ = std::move(hold);
  }
  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override {
    bool hold = false;
    {
      absl::MutexLock lock(&mu_);
      for (const v1::Event& e : events) {
        if (hold_ && hold_(e)) {
          held_run_ = e.run_id();
          hold_ = nullptr;
          hold = true;
        }
      }
    }
    if (hold) {
      held.Notify();
      release.WaitForNotification();
    }
    return inner()->AppendEventsWithRuns(events, runs);
  }
  std::string held_run() {
    absl::MutexLock lock(&mu_);
    return held_run_;
  }
  absl::Notification held, release;

 private:
  absl::Mutex mu_;
  std::function<bool(const v1::Event&)> hold_ ABSL_GUARDED_BY(mu_);
  std::string held_run_ ABSL_GUARDED_BY(mu_);
};

// Replica "a" (this fixture's run manager, one run slot, its events through `holding_`) and
// replica "b" (a claimer with room: its queue connection, its store and its own event log)
// on one state file, both joined with their writes fenced as in a daemon: b claims and
// appends as its claim loop and Adopt would.
class SharedQueueRunManagerTest : public RunManagerTest {
 protected:
  void SetUp() override {
    RunManagerTest::SetUp();
    runs_.reset();
    sessions_.reset();
    leases_ = *store::SqliteReplicaStore::Open(dir_ + "/s.db");
    store_b_ = *store::SqliteStore::Open(dir_ + "/s.db");
    for (const char* id : {"a", "b"}) {
      store::Lease lease;
      lease.replica_id = id;
      lease.expires_at = absl::Now() + absl::Hours(1);
      absl::StatusOr<int64_t> epoch = leases_->Join(lease, absl::Now());
      ASSERT_TRUE(epoch.ok()) << epoch.status();
      (id == std::string("a") ? store_.get() : store_b_.get())->FenceWrites(id, *epoch);
    }
    holding_ = std::make_unique<HoldingStore>(store_.get());
    events_ = std::make_unique<EventLog>(holding_.get(), Clock::Real());
    events_b_ = std::make_unique<EventLog>(store_b_.get(), Clock::Real());
    admission_a_ = *store::SqliteAdmissionStore::Open(dir_ + "/s.db");
    admission_b_ = *store::SqliteAdmissionStore::Open(dir_ + "/s.db");
    admission_ = admission_a_.get();
    config_.max_concurrent_runs = 1;
    config_.replica.id = "a";
    Rebuild();
  }
  void TearDown() override {
    runs_.reset();
    sessions_.reset();
    events_.reset();
    events_b_.reset();
    store_b_.reset();
    RunManagerTest::TearDown();
  }
  // Starts a run that holds a's one slot.
  std::string HoldTheSlot() {
    v1::RunAnalysisRequest slow = Sample();
    slow.mutable_sandbox()->add_setup_commands("sleep 30");
    absl::StatusOr<v1::Run> running = runs_->Start(caller_, slow);
    EXPECT_TRUE(running.ok()) << running.status();
    return running.ok() ? running->id() : "";
  }
  std::optional<std::string> ClaimB() {
    absl::StatusOr<std::optional<store::QueuedRun>> c = admission_b_->Claim("b", true);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok() || !c->has_value()) return std::nullopt;
    return (*c)->run_id;
  }
  // b's first event of a run it claimed, as Adopt appends it: its seq follows the store's last.
  void AppendAsB(const std::string& run_id) {
    v1::Event e = events::Notice(v1::Notice::SEVERITY_INFO, "replica b starts it");
    e.set_run_id(run_id);
    ASSERT_TRUE(events_b_->Append(e).ok());
    ASSERT_TRUE(events_b_->Flush(run_id).ok());
  }
  // The run's stored log: dense from 1, ending with b's event; `refused` of a's appends
  // refused as they came after b's claim.
  void ExpectDenseLogEndingWithB(const std::string& run_id, size_t events, int refused) {
    (void)events_->Flush(run_id);
    EXPECT_EQ(events_->store_errors(), refused);
    std::vector<v1::Event> log = *store_->ReadEvents(run_id, 0, 100);
    ASSERT_EQ(log.size(), events);
    for (size_t i = 0; i < log.size(); ++i) EXPECT_EQ(log[i].seq(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(log.back().type(), "notice");
  }

  std::unique_ptr<HoldingStore> holding_;
  std::unique_ptr<store::SqliteAdmissionStore> admission_a_, admission_b_;
  std::unique_ptr<store::SqliteReplicaStore> leases_;
  std::unique_ptr<store::SqliteStore> store_b_;
  std::unique_ptr<EventLog> events_b_;
};

// Issue 21 ("enqueue commits once"): a waiting run's run.queued was appended after the
// transaction that queued it, so a claim by another replica in between left the run's log
// without it (the queuer's late append refused). The queue row and its run.queued are one
// commit now: the claimer finds the event stored, and its own events follow it.
TEST_F(SharedQueueRunManagerTest, AClaimRightAfterTheQueueingFindsTheRunQueuedStored) {
  const std::string running = HoldTheSlot();
  // Were a's run.queued appended by its event log after the queueing, it would wait here
  // until b has claimed the run.
  holding_->Arm(
      [&](const v1::Event& e) { return e.type() == "run.queued" && e.run_id() != running; });
  absl::StatusOr<v1::Run> waiting = runs_->Start(caller_, Sample());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const std::string id = waiting->id();
  EXPECT_EQ(ClaimB(), id);
  AppendAsB(id);
  holding_->release.Notify();
  (void)events_->Flush(id);
  EXPECT_EQ(events_->store_errors(), 0) << "nothing of a's was refused";
  std::vector<v1::Event> log = *store_->ReadEvents(id, 0, 100);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].type(), "run.queued");
  EXPECT_EQ(log[0].seq(), 1);
  EXPECT_EQ(log[0].run_queued().position(), 1u) << "the one run waiting in the gateway";
  EXPECT_EQ(log[1].type(), "notice") << "b's, after it";
  EXPECT_EQ(log[1].seq(), 2);
}

TEST_F(SharedQueueRunManagerTest, APositionUpdateAfterAnotherReplicasClaimIsRefused) {
  const std::string running = HoldTheSlot();
  absl::StatusOr<v1::Run> first = runs_->Start(caller_, Sample());
  absl::StatusOr<v1::Run> second = runs_->Start(caller_, Sample());
  ASSERT_TRUE(first.ok() && second.ok());
  const std::string id = second->id();
  holding_->Arm([&](const v1::Event& e) {
    return e.run_id() == id && e.type() == "run.queued" && e.run_queued().position() == 1;
  });
  // The slot frees: a starts the first, and tells the second it is next.
  ASSERT_TRUE(runs_->Cancel(caller_, running, "make room").ok());
  holding_->held.WaitForNotification();
  EXPECT_EQ(ClaimB(), id) << "b may claim the run while a's position update is not stored";
  AppendAsB(id);
  holding_->release.Notify();
  ExpectDenseLogEndingWithB(id, 2, /*refused=*/1);  // a's run.queued 2, b's notice
  WaitFinished(first->id());
}

// The fault harness (tests/faults) found a run QUEUED for good after a freeze: the takeover
// leaves a lost replica's waiting run in the shared queue, for any replica to claim, and the
// frozen replica, ending its work as it woke, took the run out of the queue.
TEST_F(SharedQueueRunManagerTest, ATakenOverReplicaEndingItsWorkLeavesItsWaitingRunInTheQueue) {
  const std::string running = HoldTheSlot();
  absl::StatusOr<v1::Run> waiting = runs_->Start(caller_, Sample());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  // As the daemon's gate does once the replica finds itself taken over.
  runs_->SetClaimGate([] { return absl::UnavailableError("replica a was taken over"); });
  EXPECT_EQ(runs_->EndAll("replica a was taken over", absl::Seconds(10)), 0u);
  EXPECT_FALSE(runs_->Holds(waiting->id()));
  EXPECT_EQ(ClaimB(), waiting->id()) << "the waiting run is still the queue's";
}

}  // namespace
}  // namespace sandgate::core
