// Retention: deletes what is older than the configured `retention`: runs finished (with
// their events and artifacts) and sessions ended before now − retention.
//
// A background thread purges once at start and then every `period` (one minute), waiting
// through the injected Clock, so a test proves when a purge happens by advancing a FakeClock.
// A record is purged by the first round whose cutoff is strictly after its end time.
//
//   Retention retention({&store, &artifacts, &clock, metrics}, config.retention);
//   ...                         // purges in the background until destroyed
//   retention.PurgeBefore(cutoff);  // or now, e.g. from a test or an operator command
//
// Thread safe.
#ifndef SANDGATE_CORE_RETENTION_H_
#define SANDGATE_CORE_RETENTION_H_

#include <cstddef>
#include <functional>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/metrics.h"
#include "store/artifact_store.h"
#include "store/store.h"

namespace sandgate::core {

// Not owned; all outlive the Retention. `metrics` may be null.
struct RetentionDeps {
  store::Store* store = nullptr;
  store::ArtifactStore* artifacts = nullptr;
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
  // Purges snapshots taken before the cutoff, as runs (core/snapshots.h); may be empty.
  std::function<absl::StatusOr<size_t>(absl::Time cutoff)> purge_snapshots;
};

class Retention {
 public:
  static constexpr absl::Duration kPeriod = absl::Minutes(1);

  // `retention` zero: nothing is purged in the background (PurgeBefore still works).
  Retention(RetentionDeps deps, absl::Duration retention);
  ~Retention();  // stops the thread; a round under way finishes first

  // Deletes runs (events, artifacts) finished, and sessions ended, before `cutoff`. Returns
  // how many runs went. A run's artifacts that cannot be removed are logged and counted
  // (sandgate_cleanup_failures_total{where="retention"}), not an error.
  absl::StatusOr<size_t> PurgeBefore(absl::Time cutoff);

 private:
  void Loop();

  const RetentionDeps deps_;
  const absl::Duration retention_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once everything above is set
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RETENTION_H_
