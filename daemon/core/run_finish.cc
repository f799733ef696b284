// The finish step (DESIGN.md "A run, end to end", 7): the run's final record and its
// terminal event `run.finished`, stored together; the run leaves the admission and the table of
// active runs, and its inputs go.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/events.h"
#include "common/log.h"
#include "common/memory.h"
#include "core/run_manager.h"
#include "core/sandbox_spec.h"
#include "sandgate/v1/labels.h"

namespace sandgate::core {

void RunManager::Finish(const std::shared_ptr<ActiveRun>& ar, RunEvents& events,
                        v1::RunStatus status, std::string reason) {
  std::vector<std::string> failed_checks;
  std::optional<v1::RunSummary> summary;
  std::string run_id, tenant;
  {
    absl::MutexLock lock(&ar->mu);
    ar->run.set_status(status);
    ar->run.set_status_reason(reason);
    *ar->run.mutable_finished_at() = ToProto(deps_.clock->Now());
    for (const auto& c : ar->run.checks()) {
      if (!c.passed()) failed_checks.push_back(c.name());
    }
    if (ar->run.has_summary()) summary = ar->run.summary();
    run_id = ar->run.id();
    tenant = ar->run.tenant();
  }
  if (deps_.metrics) {
    deps_.metrics->runs_finished.Add({{"status", v1::RunStatusLabel(status)}});
    absl::MutexLock lock(&ar->mu);
    if (ar->run.has_started_at()) {
      deps_.metrics->run_seconds.Observe(absl::ToDoubleSeconds(FromProto(ar->run.finished_at()) -
                                                               FromProto(ar->run.started_at())));
    }
  }
  // The final record and run.finished in one store transaction: a caller that sees the event
  // and then calls GetRun reads the final status, and a process killed between the two
  // writes cannot leave a finished run whose log never ends (which recovery, settling only
  // unfinished records, would never end either). On a store error neither is written: the
  // record stays unfinished. Nobody else settles it while this replica goes on (a takeover
  // needs its lease to end and be claimed, a recovery its restart), so a store error is tried
  // again until the write lands: unless it was refused by fencing (another replica took this
  // one over and settled the run), or the daemon is stopping (its next start settles it). A
  // lease that lapsed in a long outage is no reason to stop: when nobody took it over, the
  // replica renews again and this write is the only one that ends the run.
  const v1::Event terminal =
      events::RunFinished(status, reason, std::move(failed_checks), summary ? &*summary : nullptr);
  for (absl::Duration wait = kReleaseRetryFirst;; wait = std::min(2 * wait, kReleaseRetryMost)) {
    absl::Status stored = events.Finish(terminal, ar->Snapshot());
    if (stored.ok() || store::IsFencedWrite(stored)) break;
    log::Warning(
        "run.finish_retrying",
        {{"run", run_id}, {"tenant", tenant}, {"retry_in_ms", absl::ToInt64Milliseconds(wait)}});
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return draining_; };
    if (deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stopping),
                                       deps_.clock->Now() + wait)) {
      break;
    }
  }
  log::Info("run.finished", {{"run", run_id},
                             {"tenant", tenant},
                             {"status", v1::RunStatusLabel(status)},
                             {"reason", reason}});
  {
    absl::MutexLock lock(&mu_);
    active_.erase(run_id);
  }
  if (ar->admitted.exchange(false)) {
    admission_.Done(ar->ticket);
    Dispatch();
  } else {
    admission_.Remove(run_id);
  }
  ReleaseQueuedBytes(*ar);
  // Done with (placed, verified, or never to run): the inputs go now, not when the last
  // holder of the run lets go of it; after a large run the freed memory goes back too.
  uint64_t handled = 0;
  for (const playbooks::InputFile& in : ar->inputs) handled += in.content.size();
  {
    absl::MutexLock lock(&ar->mu);
    for (const v1::Artifact& a : ar->run.artifacts()) handled += a.size_bytes();
  }
  std::vector<playbooks::InputFile>().swap(ar->inputs);
  if (handled >= kTrimAfterBytes) ReleaseFreeMemory();
}

}  // namespace sandgate::core
