#include "core/admission.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::core {

bool SandboxBudget::TryTake() {
  absl::MutexLock lock(&mu_);
  if (used_ >= max_) return false;
  ++used_;
  return true;
}

void SandboxBudget::Give() {
  std::function<void()> fn;
  {
    absl::MutexLock lock(&mu_);
    if (used_ > 0) --used_;
    fn = on_release_;
  }
  if (fn) fn();
}

uint32_t SandboxBudget::used() {
  absl::MutexLock lock(&mu_);
  return used_;
}

void SandboxBudget::set_on_release(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  on_release_ = std::move(fn);
}

absl::Status AdmissionQueue::Enqueue(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  if (queued_ >= max_queued_) {
    return errors::ResourceExhausted(absl::StrCat(
        "the run queue is full (", queued_, " runs waiting; max_queued_runs ", max_queued_, ")"));
  }
  waiting_[ticket.tenant].push_back(std::move(ticket));
  ++queued_;
  return absl::OkStatus();
}

bool AdmissionQueue::Remove(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  for (auto& [tenant, q] : waiting_) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->run_id == run_id) {
        q.erase(it);
        --queued_;
        return true;
      }
    }
  }
  return false;
}

bool AdmissionQueue::CanAdmit(const std::string& tenant, uint32_t limit) {
  return running_ < max_running_ && (limit == 0 || running_by_tenant_[tenant] < limit);
}

std::vector<AdmissionQueue::Ticket> AdmissionQueue::Admit() {
  std::vector<Ticket> admitted;
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (running_ >= max_running_ || queued_ == 0) break;
    // The next tenant after the last one admitted, wrapping around, with a run that fits.
    auto start = waiting_.upper_bound(last_tenant_);
    bool found = false;
    for (size_t i = 0; i < waiting_.size() && !found; ++i, ++start) {
      if (start == waiting_.end()) start = waiting_.begin();
      auto& [tenant, q] = *start;
      if (q.empty() || !CanAdmit(tenant, q.front().tenant_limit)) continue;
      if (q.front().needs_sandbox && !budget_->TryTake()) continue;
      admitted.push_back(std::move(q.front()));
      q.pop_front();
      --queued_;
      ++running_;
      ++running_by_tenant_[tenant];
      last_tenant_ = tenant;
      found = true;
    }
    if (!found) break;
  }
  return admitted;
}

void AdmissionQueue::Done(const Ticket& ticket) {
  {
    absl::MutexLock lock(&mu_);
    --running_;
    if (--running_by_tenant_[ticket.tenant] == 0) running_by_tenant_.erase(ticket.tenant);
  }
  if (ticket.needs_sandbox) budget_->Give();
}

std::vector<std::string> AdmissionQueue::Order() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> order;
  std::map<std::string, size_t> taken;
  auto start = waiting_.upper_bound(last_tenant_);
  bool any = true;
  while (any) {
    any = false;
    auto it = start;
    for (size_t i = 0; i < waiting_.size(); ++i, ++it) {
      if (it == waiting_.end()) it = waiting_.begin();
      size_t& n = taken[it->first];
      if (n < it->second.size()) {
        order.push_back(it->second[n].run_id);
        ++n;
        any = true;
      }
    }
  }
  return order;
}

size_t AdmissionQueue::waiting() {
  absl::MutexLock lock(&mu_);
  return queued_;
}

size_t AdmissionQueue::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace sandgate::core
