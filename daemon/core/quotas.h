// RunQuotas: the limits a run meets before it may wait for admission: the tenant's
// runs_per_minute, and the bytes of input all waiting runs hold (max_queued_input_bytes).
// The concurrency quota and the sandbox budget are the admission queue's (core/admission.h).
// With a shared AdmissionStore (replicas of one store), runs_per_minute counts the starts of
// the whole gateway there, exactly; the bytes of waiting inputs stay this replica's own (they
// are its memory).
//
//   RunQuotas quotas(config, clock);
//   SANDGATE_ASSIGN_OR_RETURN(uint64_t held, quotas.HoldQueuedBytes(bytes, /*enforce=*/true));
//   absl::Status rate = quotas.CheckRate(caller);   // counts a start when OK
//   if (!rate.ok()) quotas.ReleaseQueuedBytes(held);
//
// Thread safe.
#ifndef SANDGATE_CORE_QUOTAS_H_
#define SANDGATE_CORE_QUOTAS_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/tenants.h"
#include "store/admission_store.h"

namespace sandgate::core {

class RunQuotas {
 public:
  // Not owned; all outlive the RunQuotas. `shared` may be null: the rate is counted here.
  RunQuotas(const Config* config, Clock* clock, store::AdmissionStore* shared = nullptr)
      : config_(config), clock_(clock), shared_(shared) {}

  // Counts a start of `caller`'s tenant in the last minute; RESOURCE_EXHAUSTED, saying when
  // to retry, when that would pass its runs_per_minute (0: no limit). A start leaves the
  // window exactly one minute after it was counted.
  absl::Status CheckRate(const Caller& caller);

  // Holds `bytes` of a waiting run's inputs. When `enforce`, RESOURCE_EXHAUSTED if other runs
  // already hold some and this would pass max_queued_input_bytes (one run alone always fits).
  // Returns the bytes held, to give back once with ReleaseQueuedBytes.
  absl::StatusOr<uint64_t> HoldQueuedBytes(uint64_t bytes, bool enforce);
  void ReleaseQueuedBytes(uint64_t bytes);
  uint64_t queued_input_bytes();

 private:
  const Config* const config_;
  Clock* const clock_;
  store::AdmissionStore* const shared_;

  absl::Mutex mu_;
  uint64_t queued_input_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Start times of each tenant's runs in the last minute.
  absl::flat_hash_map<std::string, std::deque<absl::Time>> recent_starts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_QUOTAS_H_
