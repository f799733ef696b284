// The finish step (core/run_finish.cc) against a daemon killed at any point: a store that
// dies after its Nth write (every later write fails, as after a SIGKILL) never leaves a
// finished run whose log does not end, and recovery then ends the run with run.finished.
#include <atomic>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/events.h"
#include "core/recovery.h"
#include "core/run_manager.h"
#include "gtest/gtest.h"
#include "store/file_artifact_store.h"
#include "store/sqlite_store.h"
#include "tests/common/eventually.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/dying_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

// Ends at once: the run goes through every step to its finish (failed: no artifacts).
class QuickAgent : public agent::Agent {
 public:
  std::string name() const override { return "quick"; }
  absl::Status Run(const agent::AgentTask&, sandbox::Session&, agent::EventSink& events,
                   const CancelToken&) override {
    events.Emit(events::Notice(v1::Notice::SEVERITY_INFO, "done"));
    return absl::OkStatus();
  }
};

// What a daemon left in `store` for run `id`, read as a follower and GetRun would.
struct Left {
  bool exists = false;
  bool final = false;
  int terminal_events = 0;
  bool log_ended = false;  // its last event is run.finished
};

Left Inspect(store::Store& store, const std::string& id) {
  Left left;
  absl::StatusOr<v1::Run> run = store.GetRun(id);
  if (!run.ok()) return left;
  left.exists = true;
  left.final = run->status() >= v1::RUN_STATUS_SUCCEEDED;
  std::vector<v1::Event> events = *store.ReadEvents(id, 0, 10000);
  for (const v1::Event& e : events) left.terminal_events += e.type() == "run.finished";
  left.log_ended = !events.empty() && events.back().type() == "run.finished";
  return left;
}

// One run of QuickAgent through a RunManager writing to `store`; returns its id ("" when it
// was never stored). Returns once the run's thread has ended; `stopped` says whether to stop
// the manager (Drain) meanwhile, as a killed process stops.
std::string RunOnce(store::Store& store, store::ArtifactStore& artifacts, const std::string& at,
                    std::function<bool()> stopped) {
  Config config;
  QuickAgent agent;
  SandboxBudget sandboxes{4};
  EventLog events(&store, Clock::Real());
  testing::HostProvider provider(&store);
  RunManagerDeps deps;
  deps.config = &config;
  deps.store = &store;
  deps.artifacts = &artifacts;
  deps.events = &events;
  deps.clock = Clock::Real();
  deps.providers["local"] = &provider;
  deps.agents["quick"] = &agent;
  deps.budget = &sandboxes;
  RunManager runs(std::move(deps));
  v1::RunAnalysisRequest req;
  req.set_agent("quick");
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  std::ifstream data(std::string(SANDGATE_SOURCE_DIR) +
                     "/tests/data/northstar_cloud_financial_statements.csv");
  in->set_content(std::string(std::istreambuf_iterator<char>(data), {}));
  absl::StatusOr<v1::Run> started = runs.Start(Caller{"team-a", false}, req);
  if (!started.ok()) return "";
  EXPECT_TRUE(testing::Eventually(at + ": the run's thread ends", [&] {
    if (stopped()) runs.Drain(absl::ZeroDuration());
    return runs.active_runs() == 0;
  }));
  return started->id();
}

// One daemon life on a fresh database whose store dies after `budget` writes (or after the
// final record: see DyingStore); returns whether it died before the run ended (false: the
// whole run fit in `budget`).
bool KillAfter(int budget, bool at_final_record = false) {
  const std::string at = at_final_record ? std::string("killed after the final record")
                                         : absl::StrCat("killed after write ", budget);
  testing::ScopedTempDir dir("sg-finish");
  EXPECT_TRUE(dir.ok());
  std::unique_ptr<store::SqliteStore> inner = *store::SqliteStore::Open(dir.path() + "/s.db");
  auto artifacts = *store::FileArtifactStore::Open(dir.path() + "/artifacts");
  testing::DyingStore dying(inner.get(), budget, at_final_record);
  // A finish that meets a store error is retried while the daemon goes on: once the store
  // has died the process is gone, which stops it.
  const std::string run_id = RunOnce(dying, *artifacts, at, [&] { return dying.died(); });
  if (run_id.empty()) return true;  // killed before the run was stored
  // The process is gone: what it left must never be a finished run whose log does not end
  // (a follower would wait forever), nor an ended log under an unfinished record.
  const Left left = Inspect(*inner, run_id);
  EXPECT_TRUE(left.exists) << at;
  EXPECT_EQ(left.final, left.log_ended)
      << at << ": final record " << left.final << ", log ends with run.finished " << left.log_ended;
  // The next start settles what was left: the run ends, with exactly one run.finished.
  testing::FakeClock clock;
  EventLog events(inner.get(), &clock);
  Tenants tenants({});
  EXPECT_TRUE(RecoverRuns({inner.get(), &events, &clock, "", "", ""}, tenants,
                          [](const Caller&, const v1::Run&, v1::RunAnalysisRequest,
                             const std::string&) { return absl::UnavailableError("no room"); })
                  .ok())
      << at;
  const Left recovered = Inspect(*inner, run_id);
  EXPECT_TRUE(recovered.final && recovered.log_ended) << at;
  EXPECT_EQ(recovered.terminal_events, 1) << at;
  return dying.died();
}

// Right after the run's final record is stored, the process dies: its terminal event must be
// in the same write (the finish step was a record, then an event: this left a SUCCEEDED run
// whose log ended at session.closed, and no recovery ended it).
TEST(RunFinishTest, AKillRightAfterTheFinalRecordLeavesItsTerminalEventStored) {
  EXPECT_TRUE(KillAfter(1000, /*at_final_record=*/true));
}

// Every write of a run in turn (how many a run makes varies with the log's batching).
TEST(RunFinishTest, AKillAtAnyWriteLeavesNoFinishedRunWithoutItsTerminalEvent) {
  int budget = 0;
  while (KillAfter(budget) && !HasFailure()) {
    ++budget;
    ASSERT_LT(budget, 200) << "a run this short never fit in its store writes";
  }
}

// A store that refuses the write of a run's final record `times` times (a database restart
// under way), then takes it.
class BlinkAtTheFinish : public testing::ForwardingStore {
 public:
  BlinkAtTheFinish(store::Store* inner, int times) : ForwardingStore(inner), left_(times) {}
  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override {
    for (const v1::Run& r : runs) {
      if (r.status() >= v1::RUN_STATUS_SUCCEEDED && left_.fetch_sub(1) > 0) {
        return absl::UnavailableError("postgres: the database system is starting up");
      }
    }
    return inner()->AppendEventsWithRuns(events, runs);
  }
  absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                       const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Session>& sessions) override {
    if (!runs.empty()) return AppendEventsWithRuns(events, runs);
    return inner()->AppendEventsWithRecords(events, runs, sessions);
  }

 private:
  std::atomic<int> left_;
};

// Issue 21 item 3: a store error at the finish left the run RUNNING for good (its thread went
// on, nobody settled it). The finish is retried until it lands, with one run.finished.
TEST(RunFinishTest, AFinishThatMeetsAStoreErrorIsRetriedUntilItLands) {
  testing::ScopedTempDir dir("sg-finish");
  ASSERT_TRUE(dir.ok());
  std::unique_ptr<store::SqliteStore> inner = *store::SqliteStore::Open(dir.path() + "/s.db");
  auto artifacts = *store::FileArtifactStore::Open(dir.path() + "/artifacts");
  BlinkAtTheFinish blinking(inner.get(), 3);
  const std::string run_id =
      RunOnce(blinking, *artifacts, "a blink at the finish", [] { return false; });
  ASSERT_FALSE(run_id.empty());
  const Left left = Inspect(*inner, run_id);
  EXPECT_TRUE(left.final) << "the final record landed";
  EXPECT_TRUE(left.log_ended);
  EXPECT_EQ(left.terminal_events, 1);
}

}  // namespace
}  // namespace sandgate::core
