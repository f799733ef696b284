// The admit step: a persisted run waits in the fair queue (core/admission.h) for its tenant's
// concurrency quota and a sandbox of the global budget, told its position by `run.queued`,
// and starts on the run executor (Execute, run_pipeline.cc) when it has room.
#include <algorithm>
#include <utility>
#include <vector>

#include "common/events.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/request_validation.h"
#include "core/run_manager.h"
#include "core/run_validate.h"

namespace sandgate::core {
absl::StatusOr<v1::Run> RunManager::Admit(const std::shared_ptr<ActiveRun>& ar) {
  const v1::Run run = ar->Snapshot();
  const Caller& caller = ar->caller;
  ar->ticket = {run.id(), caller.tenant, caller.config ? caller.config->quotas.concurrent_runs : 0,
                /*needs_sandbox=*/ar->request.session_id().empty()};
  {
    absl::MutexLock lock(&mu_);
    active_[run.id()] = ar;
  }
  log::Info("run.queued", {{"run", run.id()},
                           {"tenant", run.tenant()},
                           {"playbook", run.playbook()},
                           {"agent", run.agent()}});
  RunEvents events(deps_.events, ar.get());
  absl::Status queued = admission_.Enqueue(ar->ticket);
  if (!queued.ok()) {
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(queued.message()));
    return queued;
  }
  std::vector<std::string> order = admission_.Order();
  uint32_t position =
      static_cast<uint32_t>(std::find(order.begin(), order.end(), run.id()) - order.begin() + 1);
  ar->position.store(position);
  events.Emit(events::RunQueued(position));
  Dispatch();
  return run;
}

absl::Status RunManager::Requeue(const Caller& caller, const v1::Run& run,
                                 v1::RunAnalysisRequest request) {
  // Checked again: the daemon's configuration (and the tenant's policy) may have changed.
  SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, *deps_.config));
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> ar,
                            ValidateRun(deps_, caller, std::move(request)));
  ar->request_run_id = run.id();
  {
    absl::MutexLock lock(&ar->mu);
    ar->run = run;
  }
  (void)HoldQueuedBytes(*ar, /*enforce=*/false);  // accepted before: never refused now
  ar->request_kept.store(true);                   // read from the store just now
  ShelveInputs(*ar);
  {
    RunEvents events(deps_.events, ar.get());
    events.Notice(v1::Notice::SEVERITY_WARNING,
                  "the daemon restarted while this run waited; it is queued again");
  }
  return Admit(ar).status();
}

absl::Status RunManager::HoldQueuedBytes(ActiveRun& ar, bool enforce) {
  uint64_t bytes = 0;
  for (const playbooks::InputFile& in : ar.inputs) bytes += in.content.size();
  SANDGATE_ASSIGN_OR_RETURN(uint64_t held, quotas_.HoldQueuedBytes(bytes, enforce));
  ar.queued_bytes.store(held);
  return absl::OkStatus();
}

void RunManager::ReleaseQueuedBytes(ActiveRun& ar) {
  quotas_.ReleaseQueuedBytes(ar.queued_bytes.exchange(0));
}

void RunManager::Dispatch() {
  for (const AdmissionQueue::Ticket& t : admission_.Admit()) {
    std::shared_ptr<ActiveRun> ar = FindActive(t.run_id);
    if (!ar) {  // finished while being admitted
      admission_.Done(t);
      continue;
    }
    ar->admitted.store(true);
    ReleaseQueuedBytes(*ar);
    // The executor has a thread for every run the admission lets through.
    if (!executor_.Submit([this, ar] { Execute(ar); })) {
      RunEvents events(deps_.events, ar.get());
      Finish(ar, events, v1::RUN_STATUS_FAILED, "the daemon is shutting down");
    }
  }
  // Tell waiting runs where they stand now (only those whose position changed).
  std::vector<std::string> order = admission_.Order();
  for (size_t i = 0; i < order.size(); ++i) {
    std::shared_ptr<ActiveRun> ar = FindActive(order[i]);
    uint32_t position = static_cast<uint32_t>(i + 1);
    if (!ar || ar->position.exchange(position) == position) continue;
    RunEvents events(deps_.events, ar.get());
    events.Emit(events::RunQueued(position));
  }
}

}  // namespace sandgate::core
