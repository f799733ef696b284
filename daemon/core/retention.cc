#include "core/retention.h"

#include <string>
#include <vector>

#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::core {

Retention::Retention(RetentionDeps deps, absl::Duration retention)
    : deps_(deps), retention_(retention), thread_([this] { Loop(); }) {}

Retention::~Retention() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::StatusOr<size_t> Retention::PurgeBefore(absl::Time cutoff) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> runs, deps_.store->PurgeBefore(cutoff));
  for (const std::string& id : runs) {
    absl::Status st = deps_.artifacts->RemoveRun(id);
    if (!st.ok()) {
      log::Error("retention.artifacts_failed", {{"run", id}, {"error", st.ToString()}});
      if (deps_.metrics) deps_.metrics->cleanup_failures.Add({{"where", "retention"}});
    }
  }
  if (!runs.empty()) log::Info("retention.purged", {{"runs", runs.size()}});
  if (deps_.purge_snapshots) {
    absl::StatusOr<size_t> snapshots = deps_.purge_snapshots(cutoff);
    if (!snapshots.ok())
      log::Error("retention.snapshots_failed", {{"error", snapshots.status().ToString()}});
  }
  return runs.size();
}

void Retention::Loop() {
  absl::MutexLock lock(&mu_);
  if (retention_ <= absl::ZeroDuration()) {
    deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stop_), absl::InfiniteFuture());
    return;
  }
  absl::Time next = deps_.clock->Now();
  while (!stop_) {
    if (deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stop_), next)) break;
    const absl::Time now = deps_.clock->Now();
    next = now + kPeriod;
    mu_.Unlock();  // a purge may take long; the destructor must not wait for the lock
    absl::StatusOr<size_t> purged = PurgeBefore(now - retention_);
    if (!purged.ok()) log::Error("retention.failed", {{"error", purged.status().ToString()}});
    mu_.Lock();
  }
}

}  // namespace sandgate::core
