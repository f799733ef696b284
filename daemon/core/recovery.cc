#include "core/recovery.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {

void JournalSweeper::Log(const JournalEntry& entry, const absl::Status& st) {
  if (st.ok()) {
    log::Info("sweep.removed", {{"resource", entry.id}, {"provider", entry.provider}});
  } else {
    log::Error("sweep.failed", {{"resource", entry.id}, {"error", st.ToString()}});
    if (deps_.metrics) deps_.metrics->cleanup_failures.Add({{"where", "sweep"}});
  }
}

absl::Status JournalSweeper::Sweep() {
  ResourceJournal* journal = deps_.journal != nullptr ? deps_.journal : deps_.store;
  SANDGATE_ASSIGN_OR_RETURN(std::vector<JournalEntry> entries, journal->List());
  std::vector<JournalEntry> later;
  for (const JournalEntry& entry : entries) {
    auto it = deps_.providers->find(entry.provider);
    if (it == deps_.providers->end()) {
      log::Warning("sweep.unknown_provider",
                   {{"resource", entry.id}, {"provider", entry.provider}});
      continue;
    }
    absl::Status st = it->second->Sweep(entry);
    if (st.code() == absl::StatusCode::kUnavailable) {
      log::Info("sweep.deferred", {{"resource", entry.id}, {"why", std::string(st.message())}});
      later.push_back(entry);
    } else {
      Log(entry, st);
    }
  }
  // What cannot be told yet is asked again in the background: the daemon serves meanwhile.
  if (!later.empty()) later_ = std::thread([this, later] { Later(later); });
  return absl::OkStatus();
}

void JournalSweeper::Later(std::vector<JournalEntry> entries) {
  const absl::Time give_up = deps_.clock->Now() + kGiveUpAfter;
  while (!entries.empty()) {
    absl::Time until;
    {
      absl::MutexLock lock(&mu_);
      // A stop ends the wait at once: the last round drops what is still unknown.
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return until_ <= deps_.clock->Now();
      };
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stopping), deps_.clock->Now() + kRound);
      until = std::min(give_up, until_);
    }
    std::vector<JournalEntry> still;
    for (const JournalEntry& entry : entries) {
      absl::Status st = deps_.providers->at(entry.provider)->Sweep(entry);
      if (st.code() == absl::StatusCode::kUnavailable && deps_.clock->Now() < until) {
        still.push_back(entry);
      } else {
        Log(entry, st);  // UNAVAILABLE past the deadline: the next start sweeps it
      }
    }
    entries = std::move(still);
  }
}

void JournalSweeper::StopBy(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    until_ = std::min(until_, deadline);
  }
  if (later_.joinable()) later_.join();
}

std::pair<v1::Event, v1::Run> FailedRun(v1::Run run, const std::string& why, Clock* clock) {
  run.set_status(v1::RUN_STATUS_FAILED);
  run.set_status_reason(why);
  *run.mutable_finished_at() = ToProto(clock->Now());
  v1::Event e = events::RunFinished(v1::RUN_STATUS_FAILED, why, {});
  e.set_run_id(run.id());
  e.set_session_id(run.session_id());
  return {std::move(e), std::move(run)};
}

namespace {

void LogFailed(const std::vector<std::pair<v1::Event, v1::Run>>& failed) {
  for (const auto& [e, run] : failed) {
    log::Warning("run.interrupted",
                 {{"run", run.id()}, {"tenant", run.tenant()}, {"why", run.status_reason()}});
  }
}

}  // namespace

absl::Status RecoverRuns(const RecoveryDeps& deps, const Tenants& tenants, const Requeue& requeue) {
  // By the owner column: this replica's (and rows from before the column).
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Run> runs,
                            deps.store->ListUnfinishedRunsOf(deps.replica));
  // Every run failed here, stored at the end in one transaction (EventLog::FinishAll).
  std::vector<std::pair<v1::Event, v1::Run>> failed;
  for (v1::Run& run : runs) {
    // Another live replica's runs are its own business.
    if (!run.replica().empty() && run.replica() != deps.replica) continue;
    std::string why = "interrupted: the daemon stopped before the run finished";
    if (run.status() == v1::RUN_STATUS_QUEUED) {
      absl::StatusOr<v1::RunAnalysisRequest> request = deps.store->GetRunRequest(run.id());
      std::optional<Caller> caller = tenants.Find(run.tenant());
      absl::Status requeued = !request.ok() ? request.status()
                              : !caller     ? errors::FailedPrecondition(absl::StrCat(
                                                  "tenant ", run.tenant(), " is no longer configured"))
                                            : absl::OkStatus();
      if (requeued.ok() && run.replica().empty()) {  // stored before replicas: made its own
        run.set_replica(deps.replica);
        requeued = deps.store->PutRun(run);
      }
      if (requeued.ok()) {
        requeued = requeue(*caller, run, std::move(*request),
                           "the daemon restarted while this run waited; it is queued again");
      }
      if (requeued.ok()) {
        log::Info("run.requeued",
                  {{"run", run.id()}, {"tenant", run.tenant()}, {"replica", deps.replica}});
        continue;
      }
      why = absl::StrCat(
          "the daemon restarted while the run waited, and it could not be queued "
          "again: ",
          requeued.message());
    }
    failed.push_back(FailedRun(std::move(run), why, deps.clock));
  }
  if (failed.empty()) return absl::OkStatus();
  SANDGATE_RETURN_IF_ERROR(deps.events->FinishAll(failed, {}));
  LogFailed(failed);
  return absl::OkStatus();
}

absl::Status SettleLostReplica(const RecoveryDeps& deps) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Run> runs,
                            deps.store->ListUnfinishedRunsOf(deps.replica));
  std::vector<std::pair<v1::Event, v1::Run>> failed;
  for (v1::Run& run : runs) {
    if (run.replica() != deps.replica) continue;
    std::string why = deps.lost_why;
    if (run.status() == v1::RUN_STATUS_QUEUED) {
      // A waiting run in the shared queue that any replica may start is the queue's: claimed
      // by a live replica, or waiting, or claimed by the lost one and not started (the
      // settling commit makes it wait again), whoever claims it writes its record and events.
      // Nobody else can claim the others (it alone could start them, or it never queued them).
      std::optional<store::QueuedRun> row;
      if (deps.admission != nullptr) {
        SANDGATE_ASSIGN_OR_RETURN(row, deps.admission->Find(run.id()));
      }
      if (row.has_value() && row->only_replica.empty()) {
        log::Info("run.left_queued", {{"run", run.id()},
                                      {"tenant", run.tenant()},
                                      {"lost", deps.replica},
                                      {"claimed_by", row->claimed_by}});
        continue;
      }
      absl::StrAppend(&why, ", and this run waited for it alone (",
                      row.has_value() ? "its kept session or its inputs were there"
                                      : "it was not in the shared queue",
                      ")");
    }
    failed.push_back(FailedRun(std::move(run), why, deps.clock));
  }
  std::vector<std::pair<v1::Event, v1::Session>> ended;
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Session> open,
                            deps.store->ListLiveSessionsOf(deps.replica));
  for (v1::Session& s : open) {
    if (s.replica() != deps.replica) continue;
    s.set_status(v1::SESSION_STATUS_EXPIRED);
    s.set_status_reason(deps.lost_why);
    *s.mutable_closed_at() = ToProto(deps.clock->Now());
    v1::Event closed = events::SessionClosed(s.id(), deps.lost_why);
    closed.set_run_id(s.id());
    closed.set_session_id(s.id());
    ended.emplace_back(std::move(closed), s);
  }
  // One commit, with the cleanup marked done and the slots freed: a takeover cut off before
  // it leaves all of it to the next claimer, one after it has done it all.
  SANDGATE_RETURN_IF_ERROR(deps.events->FinishAll(failed, ended, deps.replica, deps.adopted_by));
  LogFailed(failed);
  for (const auto& [e, s] : ended) {
    log::Warning("session.lost_with_replica",
                 {{"session", s.id()}, {"tenant", s.tenant()}, {"replica", deps.replica}});
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
