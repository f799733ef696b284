#include "core/run_manager.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/request_fingerprint.h"
#include "core/request_validation.h"
#include "core/run_validate.h"

namespace sandgate::core {
namespace {

bool Finished(v1::RunStatus s) {
  return s == v1::RUN_STATUS_SUCCEEDED || s == v1::RUN_STATUS_FAILED ||
         s == v1::RUN_STATUS_CANCELLED || s == v1::RUN_STATUS_TIMED_OUT;
}

}  // namespace

RunManager::RunManager(RunManagerDeps deps)
    : deps_(std::move(deps)),
      executor_("runs", deps_.config->max_concurrent_runs,
                /*max_queue=*/deps_.config->max_concurrent_runs),
      admission_(deps_.config->max_concurrent_runs, deps_.config->max_queued_runs, deps_.budget,
                 {deps_.admission, deps_.config->replica.id, deps_.clock}),
      claim_wakeups_(deps_.clock, deps_.notifier, deps_.config->replica.claim_poll,
                     deps_.config->replica.id),
      quotas_(deps_.config, deps_.clock, deps_.admission),
      side_events_("side-events", 1, 10000),
      sweeper_({deps_.store, &deps_.providers, deps_.clock, deps_.metrics, deps_.journal}),
      retention_({deps_.store, deps_.artifacts, deps_.clock, deps_.metrics, deps_.purge_snapshots},
                 deps_.config->retention),
      watchdog_([this] { WatchdogLoop(); }) {
  // A sandbox freed by a closing kept session may let a queued run start.
  deps_.budget->set_on_release([this] { Dispatch(); });
}

RunManager::~RunManager() {
  Drain(absl::ZeroDuration());
  deps_.budget->set_on_release(nullptr);
  {
    absl::MutexLock lock(&mu_);
    stop_watchdog_ = true;
  }
  claim_wakeups_.Stop();
  watchdog_.join();
  if (claimer_.joinable()) claimer_.join();
  executor_.Shutdown();
  side_events_.Shutdown();
}

absl::Status RunManager::Recover(const Tenants& tenants) {
  SANDGATE_RETURN_IF_ERROR(sweeper_.Sweep());
  // The slots the previous daemon's runs and sessions held in the shared queue are free: its
  // running runs fail below, its sessions were ended (SessionManager::Recover).
  if (deps_.admission != nullptr) {
    SANDGATE_RETURN_IF_ERROR(deps_.admission->ReleaseReplica(deps_.config->replica.id));
  }
  SANDGATE_RETURN_IF_ERROR(RecoverRuns(
      {deps_.store, deps_.events, deps_.clock, deps_.config->replica.id, "", ""}, tenants,
      [this](const Caller& caller, const v1::Run& run, v1::RunAnalysisRequest request,
             const std::string& why) { return Requeue(caller, run, std::move(request), why); }));
  // Claims start once this replica's own leftovers are settled: a claim made before would be
  // released above as the previous daemon's.
  if (admission_.shared() && !claimer_.joinable()) {
    SANDGATE_RETURN_IF_ERROR(claim_wakeups_.Start());
    claimer_ = std::thread([this] { ClaimLoop(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::Run>> RunManager::FindKeyed(const Caller& caller,
                                                             const std::string& key,
                                                             const std::string& fingerprint) {
  SANDGATE_ASSIGN_OR_RETURN(std::optional<store::KeyedRecord> found,
                            deps_.store->FindRunByIdempotencyKey(caller.tenant, key));
  if (!found) return std::optional<v1::Run>();
  SANDGATE_RETURN_IF_ERROR(CheckSameRequest(*found, key, fingerprint));
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Get(caller, found->id));
  return std::optional<v1::Run>(std::move(run));
}

std::shared_ptr<ActiveRun> RunManager::FindActive(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(run_id);
  return it == active_.end() ? nullptr : it->second;
}

absl::StatusOr<v1::Run> RunManager::Start(const Caller& caller, v1::RunAnalysisRequest request) {
  SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, *deps_.config));
  // Over the request as sent (inputs included): a retry sends the same fields.
  const std::string fingerprint =
      request.idempotency_key().empty() ? "" : RequestFingerprint(request);
  if (!request.idempotency_key().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<v1::Run> existing,
                              FindKeyed(caller, request.idempotency_key(), fingerprint));
    if (existing) return *std::move(existing);
  }
  // validate
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> ar,
                            ValidateRun(deps_, caller, std::move(request)));
  // quotas
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return errors::Unavailable("the daemon is shutting down; not accepting runs");
  }
  if (admission_.waiting() >= deps_.config->max_queued_runs) {
    return errors::ResourceExhausted(absl::StrCat("the run queue is full (max_queued_runs ",
                                                  deps_.config->max_queued_runs, ")"));
  }
  SANDGATE_RETURN_IF_ERROR(HoldQueuedBytes(*ar, /*enforce=*/true));
  absl::Status rate = quotas_.CheckRate(caller);
  if (!rate.ok()) {
    ReleaseQueuedBytes(*ar);
    return rate;
  }
  // persist
  SANDGATE_ASSIGN_OR_RETURN(std::optional<v1::Run> earlier, Persist(*ar, fingerprint));
  if (earlier) return *std::move(earlier);
  // admit
  return Admit(ar);
}

absl::StatusOr<v1::Run> RunManager::Get(const Caller& caller, const std::string& run_id) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(run_id, "run_id"));
  std::shared_ptr<ActiveRun> ar = FindActive(run_id);
  v1::Run run;
  if (ar) {
    run = ar->Snapshot();
  } else {
    SANDGATE_ASSIGN_OR_RETURN(run, deps_.store->GetRun(run_id));
  }
  if (run.tenant() != caller.tenant && !caller.is_operator) return errors::NotFound("run", run_id);
  SANDGATE_ASSIGN_OR_RETURN(int64_t last, deps_.store->LastSeq(run_id));
  run.set_last_seq(last);
  return run;
}

absl::Status RunManager::CheckEventsVisible(const Caller& caller, const std::string& id) {
  absl::StatusOr<v1::Run> run = Get(caller, id);
  if (run.status().code() != absl::StatusCode::kNotFound || deps_.sessions == nullptr)
    return run.status();
  absl::StatusOr<v1::Session> session = deps_.sessions->Get(caller, id);
  return session.ok() ? absl::OkStatus() : run.status();
}

absl::StatusOr<store::RunPage> RunManager::List(const Caller& caller, uint32_t page_size,
                                                const std::string& page_token) {
  if (page_size == 0) page_size = 50;
  if (page_size > 500) return errors::InvalidArgument("page_size: at most 500");
  SANDGATE_ASSIGN_OR_RETURN(
      store::RunPage page,
      deps_.store->ListRuns(caller.is_operator ? "" : caller.tenant, page_size, page_token));
  for (v1::Run& run : page.runs) {
    SANDGATE_ASSIGN_OR_RETURN(int64_t last, deps_.store->LastSeq(run.id()));
    run.set_last_seq(last);
  }
  return page;
}

absl::StatusOr<v1::Run> RunManager::Cancel(const Caller& caller, const std::string& run_id,
                                           const std::string& reason) {
  SANDGATE_RETURN_IF_ERROR(ValidateReason(reason));
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Get(caller, run_id));
  if (Finished(run.status())) return run;
  if (std::shared_ptr<ActiveRun> ar = FindActive(run_id)) {
    std::string why = reason.empty() ? "cancelled by the caller"
                                     : absl::StrCat("cancelled by the caller: ", reason);
    ar->cancel.Cancel(why);
    log::Info("run.cancel_requested", {{"run", run_id}, {"tenant", caller.tenant}});
    if (admission_.Remove(run_id)) {  // still waiting: it ends now, without a sandbox
      RunEvents events(deps_.events, ar.get());
      Finish(ar, events, v1::RUN_STATUS_CANCELLED, why);
    } else if (MovedAway(*ar)) {
      // Another replica claimed it as it waited here: the cancel is the claimer's to act on.
      // This replica lets go; the claim made the run's record the claimer's in its own
      // transaction, so the record answered names it and the edge sends the cancel on to it
      // (server/service.cc, CancelRun).
      LetGo(*ar);
    }
  }
  return Get(caller, run_id);
}

absl::StatusOr<std::string> RunManager::ReadArtifact(const v1::Run& run, const std::string& name,
                                                     uint64_t offset, uint64_t max_bytes) {
  for (const v1::Artifact& a : run.artifacts()) {
    if (a.name() == name) return deps_.artifacts->Read(run.id(), name, offset, max_bytes);
  }
  return errors::NotFound("artifact", absl::StrCat(run.id(), "/", name));
}

size_t RunManager::active_runs() {
  absl::MutexLock lock(&mu_);
  return active_.size();
}

size_t RunManager::Drain(absl::Duration grace) {
  std::vector<std::shared_ptr<ActiveRun>> runs;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (const auto& [id, ar] : active_) runs.push_back(ar);
  }
  for (const auto& ar : runs) {
    const std::string& id = ar->request_run_id;
    // Shared queue: a waiting run any replica may start stays in it, for one with room (one
    // claimed meanwhile is its claimer's, and the store refuses the notice below).
    const bool leave = admission_.shared() && !OnlyHere(*ar);
    const bool waiting =
        leave ? !ar->admitted.load() && !admission_.ClaimedHere(id) : admission_.Remove(id);
    if (!waiting) {
      if (MovedAway(*ar)) {
        LetGo(*ar);  // another replica claimed it: its business now
        continue;
      }
      ar->cancel.Cancel("the daemon is shutting down");  // running: its sandbox cannot outlive us
      continue;
    }
    RunEvents events(deps_.events, ar.get());
    if (ar->request_kept.load()) {
      // Waiting and kept: it stays QUEUED and is queued again when the daemon is back (or,
      // shared, starts on another replica with room).
      events.Notice(v1::Notice::SEVERITY_WARNING,
                    leave ? "this replica is shutting down; this run stays queued and starts on "
                            "a replica with room (follow again from the last seq seen)"
                          : "the daemon is shutting down; this run stays queued and starts when "
                            "it is back (follow again from the last seq seen)");
      log::Info("run.shelved", {{"run", ar->request_run_id}, {"tenant", events.tenant()}});
      ReleaseQueuedBytes(*ar);
      absl::MutexLock lock(&mu_);
      active_.erase(ar->request_run_id);
    } else {
      Finish(ar, events, v1::RUN_STATUS_CANCELLED, "the daemon is shutting down");
    }
  }
  const absl::Time deadline = deps_.clock->Now() + grace;
  size_t left;
  {
    absl::MutexLock lock(&mu_);
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_.empty(); };
    deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&none), deadline);
    left = active_.size();
  }
  // A late sweep still waiting for upstream may go on until the grace is over.
  sweeper_.StopBy(deadline);
  return left;
}

size_t RunManager::EndAll(const std::string& why, absl::Duration grace) {
  std::vector<std::shared_ptr<ActiveRun>> runs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, ar] : active_) runs.push_back(ar);
  }
  for (const auto& ar : runs) {
    const std::string& id = ar->request_run_id;
    // Shared, a waiting run's row is the queue's (any replica with room claims it, the claim
    // makes the record the claimer's); taking it out stranded the run QUEUED for good. This
    // replica claims nothing meanwhile (its claim gate: it was taken over).
    const bool waiting = admission_.shared() ? !ar->admitted.load() && !admission_.ClaimedHere(id)
                                             : admission_.Remove(id);
    if (!waiting) {
      ar->cancel.Cancel(why);
      continue;
    }
    ReleaseQueuedBytes(*ar);
    deps_.events->Forget(id);  // its claimer writes it
    absl::MutexLock lock(&mu_);
    active_.erase(id);
  }
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_.empty(); };
  deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&none), deps_.clock->Now() + grace);
  return active_.size();
}

void RunManager::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_watchdog_) {
    const absl::Time now = deps_.clock->Now();
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, ar] : active_) {
      absl::MutexLock l(&ar->mu);
      if (ar->run.status() != v1::RUN_STATUS_RUNNING || ar->timed_out.load()) continue;
      if (now >= ar->deadline) {
        ar->timed_out.store(true);
        ar->cancel.Cancel(
            absl::StrCat("run timed out after ", absl::FormatDuration(ar->run_timeout)));
      } else {
        next = std::min(next, ar->deadline);
      }
    }
    const uint64_t seen = deadlines_set_;
    auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_watchdog_ || deadlines_set_ != seen;
    };
    deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&changed), next);
  }
}

}  // namespace sandgate::core
