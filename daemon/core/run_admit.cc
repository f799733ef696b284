// The admit step: a persisted run waits in the fair queue (core/admission.h) for its tenant's
// concurrency quota and a sandbox of the global budget, told its position by `run.queued`,
// and starts on the run executor (Execute, run_pipeline.cc) when it has room. With a queue
// shared by replicas, the replica that claims it starts it, from its kept request (Adopt).
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/recovery.h"
#include "core/request_validation.h"
#include "core/run_manager.h"
#include "core/run_validate.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
bool RunManager::OnlyHere(const ActiveRun& ar) {
  // A run in a kept session starts where the session is; one whose request is not in the
  // store, only where its inputs are.
  return !ar.request.session_id().empty() || !ar.request_kept.load();
}

absl::StatusOr<v1::Run> RunManager::Admit(const std::shared_ptr<ActiveRun>& ar) {
  const v1::Run run = ar->Snapshot();
  const Caller& caller = ar->caller;
  const bool needs_sandbox = ar->request.session_id().empty();
  ar->ticket = {run.id(), caller.tenant, caller.config ? caller.config->quotas.concurrent_runs : 0,
                needs_sandbox};
  {
    absl::MutexLock lock(&mu_);
    active_[run.id()] = ar;
  }
  log::Info("run.queued", {{"run", run.id()},
                           {"tenant", run.tenant()},
                           {"playbook", run.playbook()},
                           {"agent", run.agent()}});
  RunEvents events(deps_.events, ar.get());
  std::vector<std::string> order = admission_.Order(&ar->ticket);
  uint32_t position =
      static_cast<uint32_t>(std::find(order.begin(), order.end(), run.id()) - order.begin() + 1);
  absl::StatusOr<bool> admitted = false;
  bool stored = false;  // its run.queued
  if (admission_.shared()) {
    // Its run.queued is stored with its queue row, in one commit, so a replica that claims it
    // at once finds the event and continues the log after it.
    v1::Event queued = events::RunQueued(position);
    queued.set_run_id(run.id());
    stored = deps_.events->AppendThrough(std::move(queued), [&](v1::Event* e) {
      admitted = admission_.Enqueue(ar->ticket, OnlyHere(*ar), e);
      return admitted.ok() && e != nullptr && e->seq() != 0;
    });
  } else {
    admitted = admission_.Enqueue(ar->ticket);
  }
  if (!admitted.ok()) {
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(admitted.status().message()));
    return admitted.status();
  }
  if (*admitted) position = 1;  // claimed here as it was queued: it was next, and starts now
  ar->position.store(position);
  if (!stored) events.Emit(events::RunQueued(position));
  if (*admitted) {
    Launch(ar);
  } else {
    Dispatch();
  }
  return run;
}

void RunManager::TellPositions(const std::vector<std::string>& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    std::shared_ptr<ActiveRun> ar = FindActive(order[i]);
    const uint32_t position = static_cast<uint32_t>(i + 1);
    if (!ar || ar->admitted.load() || ar->position.exchange(position) == position) continue;
    // A run another replica claimed since the order was read is that replica's: the store
    // refuses this event (Store::FenceWrites), and its log stays dense.
    RunEvents events(deps_.events, ar.get());
    events.Emit(events::RunQueued(position));
  }
}

absl::StatusOr<std::shared_ptr<ActiveRun>> RunManager::Revive(const Caller& caller,
                                                              const v1::Run& run,
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
  return ar;
}

absl::Status RunManager::Requeue(const Caller& caller, const v1::Run& run,
                                 v1::RunAnalysisRequest request, const std::string& why) {
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> ar, Revive(caller, run, std::move(request)));
  {
    RunEvents events(deps_.events, ar.get());
    events.Notice(v1::Notice::SEVERITY_WARNING, why);
  }
  return Admit(ar).status();
}

void RunManager::Adopt(const AdmissionQueue::Ticket& t) {
  const std::string& me = deps_.config->replica.id;
  absl::StatusOr<v1::Run> run = deps_.store->GetRun(t.run_id);
  if (!run.ok() || run->status() != v1::RUN_STATUS_QUEUED) {
    // Ended meanwhile (cancelled where it was queued) or gone: nothing to start.
    admission_.Done(t);
    return;
  }
  // The claim made the record this replica's (AdmissionStore::Claim); it says who queued it.
  const std::string queued_by = admission_.QueuedBy(t.run_id);
  const std::string from = queued_by.empty() ? run->replica() : queued_by;
  run->set_replica(me);
  absl::StatusOr<v1::RunAnalysisRequest> request = deps_.store->GetRunRequest(t.run_id);
  std::optional<Caller> caller = deps_.tenants ? deps_.tenants->Find(run->tenant()) : std::nullopt;
  absl::StatusOr<std::shared_ptr<ActiveRun>> ar =
      !request.ok() ? request.status()
      : !caller     ? errors::FailedPrecondition(
                          absl::StrCat("tenant ", run->tenant(), " is not configured on replica ", me))
                : Revive(*caller, *run, std::move(*request));
  if (!ar.ok()) {
    // Its record is this replica's to end: the one that queued it has let it go.
    const std::string why = absl::StrCat(
        "replica ", me, " claimed this run but could not start it: ", ar.status().message());
    // The record and its terminal event in one write: a kill between them would leave a
    // failed run whose log never ends.
    auto [e, failed] = FailedRun(*std::move(run), why, deps_.clock);
    absl::Status put = deps_.events->Finish(std::move(e), failed).status();
    log::Error("run.adopt_failed", {{"run", t.run_id}, {"why", why}, {"error", put.ToString()}});
    admission_.Done(t);
    return;
  }
  (*ar)->ticket = t;
  (*ar)->admitted.store(true);
  ReleaseQueuedBytes(**ar);
  {
    absl::MutexLock lock(&mu_);
    active_[t.run_id] = *ar;
  }
  PutRun(**ar);
  log::Info("run.adopted", {{"run", t.run_id}, {"from", from}, {"replica", me}});
  RunEvents events(deps_.events, ar->get());
  events.Notice(v1::Notice::SEVERITY_INFO,
                from == me ? "the daemon restarted while this run waited; it starts now"
                           : absl::StrCat("queued on replica ", from, "; replica ", me,
                                          " had room first and starts it"));
  if (!executor_.Submit([this, a = *ar] { Execute(a); })) {
    Finish(*ar, events, v1::RUN_STATUS_FAILED, "the daemon is shutting down");
  }
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

void RunManager::Launch(const std::shared_ptr<ActiveRun>& ar) {
  ar->admitted.store(true);
  ReleaseQueuedBytes(*ar);
  // The executor has a thread for every run the admission lets through.
  if (!executor_.Submit([this, ar] { Execute(ar); })) {
    RunEvents events(deps_.events, ar.get());
    Finish(ar, events, v1::RUN_STATUS_FAILED, "the daemon is shutting down");
  }
}

void RunManager::Dispatch() {
  // Shared queue: the runs queued here still waiting, noted BEFORE the queue is read, so one
  // missing from it was claimed (here or by another replica), not queued after the read.
  std::vector<std::shared_ptr<ActiveRun>> ours;
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return;  // a replica shutting down takes no more runs
    if (admission_.shared()) {
      for (const auto& [id, ar] : active_) {
        if (!ar->admitted.load() && ar->position.load() > 0) ours.push_back(ar);
      }
    }
  }
  for (const AdmissionQueue::Ticket& t : admission_.Admit()) {
    std::shared_ptr<ActiveRun> ar = FindActive(t.run_id);
    if (!ar) {
      if (admission_.shared()) {
        Adopt(t);  // queued by another replica
      } else {
        admission_.Done(t);  // finished while being admitted
      }
      continue;
    }
    Launch(ar);
  }
  // Tell waiting runs where they stand now (only those whose position changed).
  std::vector<std::string> order = admission_.Order();
  TellPositions(order);
  // Ours that another replica claimed: it starts them and writes their events from now on.
  const std::set<std::string> waiting(order.begin(), order.end());
  for (const std::shared_ptr<ActiveRun>& ar : ours) {
    if (waiting.count(ar->request_run_id) == 0 && MovedAway(*ar)) LetGo(*ar);
  }
}

bool RunManager::MovedAway(ActiveRun& ar) {
  return admission_.shared() && !ar.admitted.load() && !admission_.ClaimedHere(ar.request_run_id);
}

void RunManager::LetGo(ActiveRun& ar) {
  const std::string id = ar.request_run_id;
  ReleaseQueuedBytes(ar);
  deps_.events->Forget(id);  // its followers here read the claimer's events from the store
  log::Info("run.moved", {{"run", id}, {"replica", deps_.config->replica.id}});
  absl::MutexLock lock(&mu_);
  active_.erase(id);
}

void RunManager::ClaimLoop() {
  while (claim_wakeups_.Wait()) Dispatch();
}

}  // namespace sandgate::core
