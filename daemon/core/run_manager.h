// RunManager: the life of a run, from RunAnalysis to run.finished.
//
// A run is validated, persisted (QUEUED), executed on the bounded run executor (one thread per
// running run, since sandbox calls block), and always finished with exactly one terminal
// event `run.finished`, after its session has been closed. The steps are DESIGN.md's "A run,
// end to end": session, inputs, setup, agent, collect, verify, finish.
//
// Thread safe. Every method that takes a Caller scopes to the caller's tenant: another
// tenant's run is NOT_FOUND (operators see every run).
#ifndef SANDGATE_CORE_RUN_MANAGER_H_
#define SANDGATE_CORE_RUN_MANAGER_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/admission.h"
#include "core/config.h"
#include "core/event_log.h"
#include "core/executor.h"
#include "core/metrics.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "store/artifact_store.h"
#include "store/store.h"

namespace sandgate::core {

// Everything a RunManager uses; all pointers are not owned and outlive it.
struct RunManagerDeps {
  const Config* config = nullptr;
  store::Store* store = nullptr;
  store::ArtifactStore* artifacts = nullptr;
  EventLog* events = nullptr;
  Clock* clock = nullptr;
  std::map<std::string, sandbox::Provider*> providers;
  std::map<std::string, agent::Agent*> agents;
  SessionManager* sessions = nullptr;  // null: runs with a session_id are refused
  SandboxBudget* budget = nullptr;     // required; shared with the SessionManager
  Metrics* metrics = nullptr;          // may be null
};

class RunManager {
 public:
  explicit RunManager(RunManagerDeps deps);
  ~RunManager();  // Drain(0)

  // At start, before serving and after SessionManager::Recover: sweeps what a previous daemon
  // left (journal); queues again the runs it left queued (from their kept requests, checked
  // again against today's configuration, for the tenant named in `tenants`); fails the runs
  // it left running, and those that cannot be queued again, each with a terminal event
  // saying why.
  absl::Status Recover(const Tenants& tenants);

  absl::StatusOr<v1::Run> Start(const Caller& caller, v1::RunAnalysisRequest request);
  absl::StatusOr<v1::Run> Get(const Caller& caller, const std::string& run_id);
  // OK when `caller` may read the event log `id`: a run's, or a kept session's
  // own (its id; see SessionManagerDeps::events). NOT_FOUND otherwise.
  absl::Status CheckEventsVisible(const Caller& caller, const std::string& id);
  absl::StatusOr<store::RunPage> List(const Caller& caller, uint32_t page_size,
                                      const std::string& page_token);
  absl::StatusOr<v1::Run> Cancel(const Caller& caller, const std::string& run_id,
                                 const std::string& reason);
  absl::StatusOr<std::string> ReadArtifact(const Caller& caller, const std::string& run_id,
                                           const std::string& name, uint64_t offset,
                                           uint64_t max_bytes);

  // Refuses new runs, cancels every running run, and waits up to `grace` for them to finish
  // (sessions closed, terminal events written). A waiting run whose request is kept stays
  // QUEUED for the next start (Recover), with a notice; one without is cancelled. Returns the
  // number still active.
  size_t Drain(absl::Duration grace);
  size_t active_runs();
  // Retention: deletes runs (events, artifacts) finished, and sessions ended, before `cutoff`.
  // Returns how many runs went.
  absl::StatusOr<size_t> PurgeBefore(absl::Time cutoff);
  absl::StatusOr<size_t> PurgeOlderThan(absl::Duration age) { return PurgeBefore(deps_.clock->Now() - age); }
  size_t queued_runs() { return admission_.waiting(); }
  uint64_t queued_input_bytes() {
    absl::MutexLock lock(&mu_);
    return queued_input_bytes_;
  }

 private:
  struct ActiveRun;
  class RunEvents;

  absl::Status Validate(const v1::RunAnalysisRequest& request,
                        std::vector<playbooks::InputFile>* inputs) const;
  // Checks `request` for `caller` and builds its run (a new QUEUED record, not stored).
  absl::StatusOr<std::shared_ptr<ActiveRun>> Prepare(const Caller& caller,
                                                     v1::RunAnalysisRequest request) const;
  // The run stored under idempotency `key` (none: nullopt), when it was made by
  // a request with `fingerprint`; FAILED_PRECONDITION when by a different one.
  absl::StatusOr<std::optional<v1::Run>> FindKeyed(
      const Caller& caller, const std::string& key,
      const std::string& fingerprint);
  // Queues a prepared run whose record is stored, and tells its events where it stands.
  absl::StatusOr<v1::Run> Admit(const std::shared_ptr<ActiveRun>& run);
  // Queues again a run a previous daemon left queued.
  absl::Status Requeue(const Caller& caller, const v1::Run& run, v1::RunAnalysisRequest request);
  // Keeps the run's request, inputs included, in the store (before Admit: the run is not
  // shared yet).
  absl::Status KeepRequest(ActiveRun& run);
  // A run whose request is kept waits with its input contents only in the store (a full
  // queue is max_queued_input_bytes, 1 GiB by default); Execute takes them back.
  static void ShelveInputs(ActiveRun& run);
  absl::Status UnshelveInputs(ActiveRun& run);
  void Execute(const std::shared_ptr<ActiveRun>& run);
  // Agent, collect, verify, in a sandbox made ready (core/sandbox_maker.h).
  // Returns the agent's status.
  absl::Status RunInSession(ActiveRun& run, sandbox::Session& session, RunEvents& events);
  void Finish(const std::shared_ptr<ActiveRun>& run, RunEvents& events, v1::RunStatus status,
              std::string reason);
  void PutRun(ActiveRun& run);
  // Appends `event` to the run's log from the side-events executor (dropped once CloseSide ran).
  void EmitSide(const std::shared_ptr<ActiveRun>& run, const std::string& session_id, v1::Event event);
  // Waits for the side events queued so far, then drops any later ones.
  void CloseSide(ActiveRun& run);
  void WatchdogLoop();
  void LogSweep(const JournalEntry& entry, const absl::Status& swept);
  // Asks again, every 250 ms, about journal entries a provider could not tell at start
  // (Sweep said UNAVAILABLE), for at most a minute or until a drain's grace is over.
  void LateSweep(std::vector<JournalEntry> entries);
  // Starts every queued run that now has room, then tells the others their new position.
  void Dispatch();
  absl::Status CheckRate(const Caller& caller);
  // Counts a waiting run's input bytes (RESOURCE_EXHAUSTED past max_queued_input_bytes when
  // `enforce`); released, once, when it leaves the queue.
  absl::Status HoldQueuedBytes(ActiveRun& run, bool enforce);
  void ReleaseQueuedBytes(ActiveRun& run);

  const RunManagerDeps deps_;
  Executor executor_;
  AdmissionQueue admission_;
  // Appends events that arrive off the run's thread (proxy decisions, session expiry
  // warnings), whose callers must not block.
  Executor side_events_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ActiveRun>> active_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t queued_input_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Start times of each tenant's runs in the last minute (runs_per_minute).
  absl::flat_hash_map<std::string, std::deque<absl::Time>> recent_starts_ ABSL_GUARDED_BY(mu_);
  bool stop_watchdog_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
  absl::Time late_sweep_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread late_sweeper_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RUN_MANAGER_H_
