// RunManager: the life of a run, from RunAnalysis to run.finished.
//
// A run is a pipeline of named steps, DESIGN.md's "A run, end to end", each a function in the
// file named here (docs/pipeline.md has the table):
//
//   Start:   validate (run_validate.cc ValidateRun) → quotas (quotas.cc RunQuotas)
//            → persist (run_persist.cc Persist) → admit (run_admit.cc Admit, Dispatch)
//   Execute (run_pipeline.cc), on the bounded run executor (one thread per running run,
//   since sandbox calls block):
//            make the sandbox (InOwnSandbox: sandbox_maker.cc MakeSandbox; a kept one:
//            LeaseKeptSession: SessionManager::Acquire, then InKeptSession) → place inputs
//            (sandbox_maker.cc PrepareSandbox) → agent → collect → verify (run_collect.cc RunAgent,
//            Collect, Verify) → finish (run_finish.cc Finish, after Conclude chose the status)
//
// Every run ends with exactly one terminal event `run.finished`, after its session has been
// closed. Recovery after a restart is core/recovery.h, retention core/retention.h; the run
// timeout is this class's watchdog, which waits through the injected Clock.
//
// Thread safe. Every method that takes a Caller scopes to the caller's tenant: another
// tenant's run is NOT_FOUND (operators see every run).
#ifndef SANDGATE_CORE_RUN_MANAGER_H_
#define SANDGATE_CORE_RUN_MANAGER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/admission.h"
#include "core/executor.h"
#include "core/quotas.h"
#include "core/recovery.h"
#include "core/retention.h"
#include "core/run_state.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace sandgate::core {

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
  // Queues again a stored QUEUED run from its kept request: one a previous daemon left, or
  // one a lost replica left (core/replica.h); a notice tells its followers `why`.
  absl::Status Requeue(const Caller& caller, const v1::Run& run, v1::RunAnalysisRequest request,
                       const std::string& why);
  absl::StatusOr<v1::Run> Get(const Caller& caller, const std::string& run_id);
  // OK when `caller` may read the event log `id`: a run's, or a kept session's
  // own (its id; see SessionManagerDeps::events). NOT_FOUND otherwise.
  absl::Status CheckEventsVisible(const Caller& caller, const std::string& id);
  absl::StatusOr<store::RunPage> List(const Caller& caller, uint32_t page_size,
                                      const std::string& page_token);
  absl::StatusOr<v1::Run> Cancel(const Caller& caller, const std::string& run_id,
                                 const std::string& reason);
  // Up to `max_bytes` from `offset` of artifact `name` of `run`, a record Get gave the
  // caller: a download checks who may read the run once, not again for every chunk (each a
  // store round trip on PostgreSQL). NOT_FOUND when the run has no such artifact.
  absl::StatusOr<std::string> ReadArtifact(const v1::Run& run, const std::string& name,
                                           uint64_t offset, uint64_t max_bytes);

  // Refuses new runs, cancels every running run, and waits up to `grace` (on the injected
  // clock) for them to finish (sessions closed, terminal events written). A waiting run whose
  // request is kept stays QUEUED for the next start (Recover), with a notice; one without is
  // cancelled. Returns the number still active.
  size_t Drain(absl::Duration grace);
  // For a replica that was taken over (core/replica.h): its runs were settled elsewhere and
  // their writes here are refused. Cancels every running run with `why` and forgets every
  // waiting one here, then waits up to `grace` for the running ones to end. A waiting run of
  // the shared queue keeps its row there: the takeover left it to the queue (or queued it
  // again on the claimer) and whoever claims it runs it. Takes new runs afterwards. Returns
  // how many are still active.
  size_t EndAll(const std::string& why, absl::Duration grace);
  size_t active_runs();
  // Whether run `id` is queued or running in this daemon's memory (no store read).
  bool Holds(const std::string& id) { return FindActive(id) != nullptr; }
  // Retention (core/retention.h): deletes runs (events, artifacts) finished, and sessions
  // ended, before `cutoff`. Returns how many runs went.
  absl::StatusOr<size_t> PurgeBefore(absl::Time cutoff) { return retention_.PurgeBefore(cutoff); }
  absl::StatusOr<size_t> PurgeOlderThan(absl::Duration age) {
    return PurgeBefore(deps_.clock->Now() - age);
  }
  size_t queued_runs() { return admission_.waiting(); }
  // Shared queue: claims only while `gate` is OK (AdmissionQueue::SetClaimGate).
  void SetClaimGate(std::function<absl::Status()> gate) {
    admission_.SetClaimGate(std::move(gate));
  }
  uint64_t queued_input_bytes() { return quotas_.queued_input_bytes(); }

 private:
  // The run stored under idempotency `key` (none: nullopt), when it was made by
  // a request with `fingerprint`; FAILED_PRECONDITION when by a different one.
  absl::StatusOr<std::optional<v1::Run>> FindKeyed(const Caller& caller, const std::string& key,
                                                   const std::string& fingerprint);
  std::shared_ptr<ActiveRun> FindActive(const std::string& run_id);

  // run_persist.cc. Stores a validated run's record (QUEUED) and its request; `fingerprint`
  // is the request's (idempotency). Returns the run an earlier request with the same key made
  // instead, when it won a race.
  absl::StatusOr<std::optional<v1::Run>> Persist(ActiveRun& run, const std::string& fingerprint);
  // Keeps the run's request, inputs included, in the store (before Admit: the run is not
  // shared yet).
  absl::Status KeepRequest(ActiveRun& run);
  // A run whose request is kept waits with its input contents only in the store (a full
  // queue is max_queued_input_bytes, 1 GiB by default); Execute takes them back.
  static void ShelveInputs(ActiveRun& run);
  absl::Status UnshelveInputs(ActiveRun& run);
  void PutRun(ActiveRun& run);

  // run_admit.cc. Queues a persisted run, and tells its events where it stands.
  absl::StatusOr<v1::Run> Admit(const std::shared_ptr<ActiveRun>& run);
  // Starts every queued run that now has room, then tells the others their new position.
  // Shared queue: a run claimed here that another replica queued is started here (Adopt),
  // and a run queued here that another replica claimed is forgotten here.
  void Dispatch();
  // An ActiveRun for a stored QUEUED run, from its kept request (checked again against
  // today's configuration), its inputs left in the store.
  absl::StatusOr<std::shared_ptr<ActiveRun>> Revive(const Caller& caller, const v1::Run& run,
                                                    v1::RunAnalysisRequest request);
  // Whether only this replica can start the run (shared queue: its kept session is here, or
  // its request is not kept in the store).
  static bool OnlyHere(const ActiveRun& run);
  // Tells the runs of `order` (the waiting runs, in admission order) that are queued here
  // and whose place changed their new position (run.queued).
  void TellPositions(const std::vector<std::string>& order);
  // Shared queue: whether a run queued here, not started here, is no longer waiting as this
  // replica's: another replica claimed it (call once it is known not to wait any more).
  bool MovedAway(ActiveRun& run);
  // Forgets here a run another replica claimed: it starts it and writes its events now.
  void LetGo(ActiveRun& run);
  // Starts here a run another replica queued, which this one claimed.
  void Adopt(const AdmissionQueue::Ticket& ticket);
  // Starts an admitted run of this replica on the run executor.
  void Launch(const std::shared_ptr<ActiveRun>& run);
  // Shared queue: claims waiting runs when the queue changes anywhere (a notification) and
  // every replica.claim_poll_ms, so a run queued on another replica (or a slot freed there)
  // is seen here at once, and even when a notification was lost.
  void ClaimLoop();
  // Counts a waiting run's input bytes in quotas_ (RESOURCE_EXHAUSTED past
  // max_queued_input_bytes when `enforce`); released, once, when it leaves the queue.
  absl::Status HoldQueuedBytes(ActiveRun& run, bool enforce);
  void ReleaseQueuedBytes(ActiveRun& run);

  // run_pipeline.cc: the steps on the run's thread.
  void Execute(const std::shared_ptr<ActiveRun>& run);
  // The run is RUNNING in session `session_id`: its record, its deadline, run.started.
  void BeginRunning(ActiveRun& run, const std::string& session_id, RunEvents& events);
  // Make the sandbox (and place the inputs), agent, collect, verify, close. Returns the
  // agent's status (or the first step's that failed).
  // `warm` (may be null): a ready sandbox taken for the run, named `session_id`.
  absl::Status InOwnSandbox(const std::shared_ptr<ActiveRun>& run, const std::string& session_id,
                            WarmSandbox* warm, RunEvents& events);
  // A lease on the run's kept session, whose expiry warnings and network decisions become
  // the run's events (from the side executor).
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> LeaseKeptSession(
      const std::shared_ptr<ActiveRun>& run, const std::string& session_id);
  absl::Status InKeptSession(const std::shared_ptr<ActiveRun>& run, const std::string& session_id,
                             std::unique_ptr<SessionManager::Lease> lease, RunEvents& events);
  // Finishes with the status the steps' outcome means: timed out, cancelled, failed (the
  // agent's error, or the failed checks by name), or succeeded.
  void Conclude(const std::shared_ptr<ActiveRun>& run, RunEvents& events,
                const absl::Status& agent_status);
  // Appends `event` to the run's log from the side-events executor (dropped once CloseSide ran).
  void EmitSide(const std::shared_ptr<ActiveRun>& run, const std::string& session_id,
                v1::Event event);
  // Waits for the side events queued so far, then drops any later ones.
  void CloseSide(ActiveRun& run);

  // run_collect.cc: agent, collect, verify, in a sandbox made ready. Returns the agent's
  // status, or why collecting or verifying failed.
  absl::Status RunInSession(ActiveRun& run, sandbox::Session& session, RunEvents& events);
  absl::Status RunAgent(ActiveRun& run, sandbox::Session& session, RunEvents& events);
  // Copies the playbook's artifacts out into the artifact store (also after a failed agent,
  // `agent_status`); returns those stored.
  absl::StatusOr<std::vector<v1::Artifact>> Collect(ActiveRun& run, sandbox::Session& session,
                                                    RunEvents& events,
                                                    const absl::Status& agent_status);
  absl::Status Verify(ActiveRun& run, const std::vector<v1::Artifact>& stored, RunEvents& events);

  // run_finish.cc: the record final, then run.finished; the run leaves the admission, its
  // inputs go.
  void Finish(const std::shared_ptr<ActiveRun>& run, RunEvents& events, v1::RunStatus status,
              std::string reason);

  // Times out every running run whose deadline has come, waiting through the clock until the
  // next one (or until a run starts).
  void WatchdogLoop();

  const RunManagerDeps deps_;
  Executor executor_;
  AdmissionQueue admission_;
  ClaimWakeups claim_wakeups_;  // the claim loop's: notifications and the poll
  RunQuotas quotas_;
  // Appends events that arrive off the run's thread (proxy decisions, session expiry
  // warnings), whose callers must not block.
  Executor side_events_;
  JournalSweeper sweeper_;
  Retention retention_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ActiveRun>> active_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_watchdog_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped when a run gets a deadline, so the watchdog waits for the new earliest one.
  uint64_t deadlines_set_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;  // starts once everything above is set
  std::thread claimer_;   // shared queue only, from Recover on
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RUN_MANAGER_H_
