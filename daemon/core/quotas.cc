#include "core/quotas.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::core {

namespace {

absl::Status RateUsedUp(const std::string& tenant, uint32_t limit, absl::Duration wait) {
  return errors::ResourceExhausted(absl::StrCat(
      "quota runs_per_minute (", limit, ") of tenant ", tenant, " is used up; retry in ",
      absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1))), "s"));
}

}  // namespace

absl::Status RunQuotas::CheckRate(const Caller& caller) {
  const uint32_t limit = caller.config ? caller.config->quotas.runs_per_minute : 0;
  if (limit == 0) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  if (shared_ != nullptr) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<absl::Time> retry_at,
                              shared_->CountStart(caller.tenant, limit, now));
    if (retry_at) return RateUsedUp(caller.tenant, limit, *retry_at - now);
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  std::deque<absl::Time>& starts = recent_starts_[caller.tenant];
  while (!starts.empty() && starts.front() <= now - absl::Minutes(1)) starts.pop_front();
  if (starts.size() >= limit)
    return RateUsedUp(caller.tenant, limit, starts.front() + absl::Minutes(1) - now);
  starts.push_back(now);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RunQuotas::HoldQueuedBytes(uint64_t bytes, bool enforce) {
  const uint64_t max = config_->max_queued_input_bytes;
  absl::MutexLock lock(&mu_);
  if (enforce && queued_input_bytes_ > 0 && queued_input_bytes_ + bytes > max) {
    return errors::ResourceExhausted(
        absl::StrCat("waiting runs already hold ", queued_input_bytes_ >> 20,
                     " MiB of inputs and this run's ", (bytes + (1 << 20) - 1) >> 20,
                     " MiB would pass max_queued_input_bytes (", max >> 20, " MiB); retry later"));
  }
  queued_input_bytes_ += bytes;
  return bytes;
}

void RunQuotas::ReleaseQueuedBytes(uint64_t bytes) {
  if (bytes == 0) return;
  absl::MutexLock lock(&mu_);
  queued_input_bytes_ -= bytes;
}

uint64_t RunQuotas::queued_input_bytes() {
  absl::MutexLock lock(&mu_);
  return queued_input_bytes_;
}

}  // namespace sandgate::core
