#include "core/quotas.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::core {

absl::Status RunQuotas::CheckRate(const Caller& caller) {
  const uint32_t limit = caller.config ? caller.config->quotas.runs_per_minute : 0;
  if (limit == 0) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  std::deque<absl::Time>& starts = recent_starts_[caller.tenant];
  while (!starts.empty() && starts.front() <= now - absl::Minutes(1)) starts.pop_front();
  if (starts.size() >= limit) {
    absl::Duration wait = starts.front() + absl::Minutes(1) - now;
    return errors::ResourceExhausted(absl::StrCat(
        "quota runs_per_minute (", limit, ") of tenant ", caller.tenant, " is used up; retry in ",
        absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1))), "s"));
  }
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
