// What the steps of a run share (core/run_manager.h drives them): the run's dependencies,
// its state while it is active (ActiveRun), and the sink its events go through (RunEvents).
// Internal to core/: callers use RunManager.
#ifndef SANDGATE_CORE_RUN_STATE_H_
#define SANDGATE_CORE_RUN_STATE_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/admission.h"
#include "core/config.h"
#include "core/event_log.h"
#include "core/images.h"
#include "core/metrics.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "core/warm_pool.h"
#include "playbooks/playbook.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"
#include "store/admission_store.h"
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
  // Ready sandboxes: a run's own sandbox of a shape it keeps is taken from it. May be null.
  WarmPool* warm_pool = nullptr;
  // Built sandbox images (SandboxSpec.image). May be null: only the host's root.
  const ImageStore* images = nullptr;
  // What the start-up sweep lists: this replica's entries (core/replica.h); null = the store's.
  ResourceJournal* journal = nullptr;
  // The queue and quotas the replicas of one store share (store/admission_store.h); null =
  // this daemon's own, in memory. With one, a run another replica queued may start here,
  // for its tenant found in `tenants`.
  store::AdmissionStore* admission = nullptr;
  const Tenants* tenants = nullptr;
  // Nudges the claim loop when the shared queue changes anywhere (store::kQueueChannel); may
  // be null: it polls every replica.claim_poll_ms only.
  store::Notifier* notifier = nullptr;
  // Retention also purges the snapshots (core/snapshots.h); may be empty.
  std::function<absl::StatusOr<size_t>(absl::Time cutoff)> purge_snapshots;
};

// One run from Start to Finish. Shared by the RunManager's table of active runs, the run's
// thread and the callbacks of its sandbox; thread safe as annotated.
struct ActiveRun {
  // Constant after Start (core/run_validate.h builds them).
  Caller caller;
  std::string request_run_id;
  v1::RunAnalysisRequest request;            // without its inputs' contents
  std::vector<playbooks::InputFile> inputs;  // emptied by Finish
  const playbooks::Playbook* playbook = nullptr;
  playbooks::TaskSettings settings;
  sandbox::Provider* provider = nullptr;
  agent::Agent* agent = nullptr;
  absl::Duration run_timeout;
  absl::Duration command_timeout;  // a kept session's, when the request sets none

  CancelToken cancel;
  std::atomic<bool> timed_out{false};
  AdmissionQueue::Ticket ticket;
  std::atomic<bool> admitted{false};
  // Its inputs' bytes, counted in RunQuotas while it waits (0 once released).
  std::atomic<uint64_t> queued_bytes{0};
  std::atomic<bool> request_kept{false};  // in the store (PutRunRequest) until it starts
  // The inputs' contents are only in the kept request (names and order stay in `inputs`):
  // a waiting run holds none of its input bytes in memory. Execute reads them back.
  std::atomic<bool> inputs_shelved{false};
  std::atomic<uint32_t> position{0};  // last position told in run.queued
  // Set once the run is done with its session: a proxy decision or expiry warning arriving
  // later is dropped, so run.finished stays the last event.
  std::atomic<bool> side_closed{false};
  std::atomic<uint32_t> next_command_id{0};

  absl::Mutex mu;
  v1::Run run ABSL_GUARDED_BY(mu);
  absl::Time deadline ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();  // run_timeout's

  v1::Run Snapshot() {
    absl::MutexLock lock(&mu);
    return run;
  }
};

// Fills run and session ids in, appends to the log; a log failure is logged, not fatal to
// the run (the run's final state is still persisted with the run record). Used by one thread
// at a time.
class RunEvents : public agent::EventSink {
 public:
  RunEvents(EventLog* log, ActiveRun* run);
  void set_session_id(std::string id) { session_id_ = std::move(id); }
  const std::string& run_id() const { return run_id_; }
  const std::string& tenant() const { return tenant_; }
  void Emit(v1::Event event) override;
  // Emits the run's terminal event with its final record, both stored in one transaction
  // (EventLog::Finish); a failure is handled as Emit's, and returned (neither was stored).
  absl::Status Finish(v1::Event terminal, v1::Run record);
  uint32_t NextCommandId() override { return ++run_->next_command_id; }
  void Notice(v1::Notice::Severity severity, std::string message);

 private:
  // Logs a failed append; a fenced one cancels the run.
  void Check(const absl::Status& appended);

  EventLog* const log_;
  ActiveRun* const run_;
  std::string run_id_, tenant_, session_id_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RUN_STATE_H_
