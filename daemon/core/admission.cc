#include "core/admission.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"

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

void SandboxBudget::Untake() {
  absl::MutexLock lock(&mu_);
  if (used_ > 0) --used_;
}

uint32_t SandboxBudget::used() {
  absl::MutexLock lock(&mu_);
  return used_;
}

void SandboxBudget::set_on_release(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  on_release_ = std::move(fn);
}

absl::StatusOr<bool> AdmissionQueue::Enqueue(Ticket ticket, bool only_here, v1::Event* queued) {
  if (shared()) {
    const store::QueuedRun row{ticket.run_id,
                               ticket.tenant,
                               ticket.tenant_limit,
                               ticket.needs_sandbox,
                               only_here ? shared_.replica : "",
                               shared_.replica,
                               shared_.clock->Now(),
                               ""};
    // As in AdmitShared: the room is this replica's, a sandbox in hand before the claim.
    const bool may_claim = MayClaim();
    absl::MutexLock claiming(&claim_mu_);
    store::RoomHere room;
    {
      absl::MutexLock lock(&mu_);
      room.run_slot = may_claim && running_ < max_running_;
    }
    room.sandbox = room.run_slot && budget_->TryTake();
    absl::StatusOr<bool> claimed = shared_.store->Enqueue(row, max_queued_, room, queued);
    if (room.sandbox && (!claimed.ok() || !*claimed || !ticket.needs_sandbox)) budget_->Untake();
    if (!claimed.ok() || !*claimed) return claimed;
    absl::MutexLock lock(&mu_);
    ++running_;
    claimed_here_.emplace(ticket.run_id, shared_.replica);
    return true;
  }
  absl::MutexLock lock(&mu_);
  if (queued_ >= max_queued_) {
    return errors::ResourceExhausted(absl::StrCat(
        "the run queue is full (", queued_, " runs waiting; max_queued_runs ", max_queued_, ")"));
  }
  waiting_[ticket.tenant].push_back(std::move(ticket));
  ++queued_;
  return false;
}

bool AdmissionQueue::Remove(const std::string& run_id) {
  if (shared()) {
    absl::StatusOr<bool> removed = shared_.store->Remove(run_id);
    if (!removed.ok()) {
      log::Error("admission.remove_failed",
                 {{"run", run_id}, {"error", removed.status().ToString()}});
    }
    return removed.ok() && *removed;
  }
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

void AdmissionQueue::SetClaimGate(std::function<absl::Status()> gate) {
  absl::MutexLock lock(&mu_);
  claim_gate_ = std::move(gate);
}

bool AdmissionQueue::MayClaim() {
  std::function<absl::Status()> gate;
  {
    absl::MutexLock lock(&mu_);
    gate = claim_gate_;
  }
  // Outside the lock: the gate takes the replica's own.
  return !gate || gate().ok();
}

std::vector<AdmissionQueue::Ticket> AdmissionQueue::AdmitShared() {
  std::vector<Ticket> admitted;
  if (!MayClaim()) return admitted;  // the queue's runs are for replicas that hold a lease
  absl::MutexLock claiming(&claim_mu_);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (running_ >= max_running_) break;
    }
    // A sandbox is taken before the claim, so a run that needs one is claimed only with one
    // in hand; given back when the run claimed needs none, or nothing was claimed.
    const bool sandbox = budget_->TryTake();
    absl::StatusOr<std::optional<store::QueuedRun>> claimed =
        shared_.store->Claim(shared_.replica, sandbox);
    if (sandbox && (!claimed.ok() || !claimed->has_value() || !(*claimed)->needs_sandbox)) {
      budget_->Untake();
    }
    if (!claimed.ok()) {  // the store is out of reach: the poll tries again
      log::Error("admission.claim_failed",
                 {{"replica", shared_.replica}, {"error", claimed.status().ToString()}});
      break;
    }
    if (!claimed->has_value()) break;
    const store::QueuedRun& run = **claimed;
    absl::MutexLock lock(&mu_);
    ++running_;
    claimed_here_.emplace(run.run_id, run.enqueued_by);
    admitted.push_back({run.run_id, run.tenant, run.tenant_limit, run.needs_sandbox});
  }
  return admitted;
}

std::string AdmissionQueue::QueuedBy(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  auto it = claimed_here_.find(run_id);
  return it == claimed_here_.end() ? "" : it->second;
}

bool AdmissionQueue::ClaimedHere(const std::string& run_id) {
  absl::MutexLock claiming(&claim_mu_);
  absl::MutexLock lock(&mu_);
  return claimed_here_.count(run_id) > 0;
}

std::vector<AdmissionQueue::Ticket> AdmissionQueue::Admit() {
  if (shared()) return AdmitShared();
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
  if (shared()) {
    // A store error (a restart of the database, a blip) must not leave the slot taken while
    // this replica goes on: tried again until it lands, for as long as an outage may last
    // (kReleaseRetryFor). A slot whose record became final was freed with it already (the
    // finish's trigger), and a takeover's ReleaseReplica frees the rest; this finds nothing.
    const absl::Time give_up = shared_.clock->Now() + kReleaseRetryFor;
    for (absl::Duration wait = kReleaseRetryFirst;; wait = std::min(2 * wait, kReleaseRetryMost)) {
      absl::Status released = shared_.store->Release(ticket.run_id);
      if (released.ok()) break;
      const bool retry = shared_.clock->Now() < give_up;
      log::Error("admission.release_failed",
                 {{"run", ticket.run_id},
                  {"error", released.ToString()},
                  {"retry_in_ms", retry ? absl::ToInt64Milliseconds(wait) : 0}});
      if (!retry) break;
      shared_.clock->SleepFor(wait);
    }
    {
      absl::MutexLock lock(&mu_);
      if (claimed_here_.erase(ticket.run_id) > 0) --running_;
    }
    if (ticket.needs_sandbox) budget_->Give();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    --running_;
    if (--running_by_tenant_[ticket.tenant] == 0) running_by_tenant_.erase(ticket.tenant);
  }
  if (ticket.needs_sandbox) budget_->Give();
}

ClaimWakeups::~ClaimWakeups() {
  if (subscription_ != 0) notifier_->Unsubscribe(subscription_);
}

absl::Status ClaimWakeups::Start() {
  if (notifier_ == nullptr) return absl::OkStatus();
  // An empty payload is a change of the queue, or the listener has just connected again (a
  // notification may have been lost meanwhile); a claim is news only to its run's queuer.
  auto on_queue = [this](const std::string&, const std::string& payload) {
    if (payload.empty() || payload == claimed_from_) Nudge();
  };
  SANDGATE_ASSIGN_OR_RETURN(subscription_, notifier_->Subscribe(store::kQueueChannel, on_queue));
  return absl::OkStatus();
}

void ClaimWakeups::Nudge() {
  absl::MutexLock lock(&mu_);
  nudged_ = true;
}

bool ClaimWakeups::Wait() {
  absl::MutexLock lock(&mu_);
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return nudged_ || stopped_; };
  clock_->AwaitWithDeadline(mu_, absl::Condition(&woken), clock_->Now() + poll_);
  nudged_ = false;
  return !stopped_;
}

void ClaimWakeups::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

std::vector<std::string> RoundRobinOrder(
    const std::map<std::string, std::vector<std::string>>& waiting,
    const std::string& last_tenant) {
  std::vector<std::string> order;
  std::map<std::string, size_t> taken;
  auto start = waiting.upper_bound(last_tenant);
  bool any = true;
  while (any) {
    any = false;
    auto it = start;
    for (size_t i = 0; i < waiting.size(); ++i, ++it) {
      if (it == waiting.end()) it = waiting.begin();
      size_t& n = taken[it->first];
      if (n < it->second.size()) {
        order.push_back(it->second[n]);
        ++n;
        any = true;
      }
    }
  }
  return order;
}

std::vector<std::string> AdmissionQueue::Order(const Ticket* plus) {
  std::map<std::string, std::vector<std::string>> by_tenant;
  if (shared()) {
    absl::StatusOr<store::WaitingRuns> waiting = shared_.store->Waiting();
    if (!waiting.ok()) {
      log::Error("admission.list_failed", {{"error", waiting.status().ToString()}});
      return {};
    }
    for (const store::QueuedRun& r : waiting->runs) by_tenant[r.tenant].push_back(r.run_id);
    if (plus != nullptr) by_tenant[plus->tenant].push_back(plus->run_id);
    return RoundRobinOrder(by_tenant, waiting->last_tenant);
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [tenant, q] : waiting_) {
    for (const Ticket& t : q) by_tenant[tenant].push_back(t.run_id);
  }
  if (plus != nullptr) by_tenant[plus->tenant].push_back(plus->run_id);
  return RoundRobinOrder(by_tenant, last_tenant_);
}

size_t AdmissionQueue::waiting() {
  if (shared()) {
    absl::StatusOr<uint64_t> n = shared_.store->WaitingCount();
    if (!n.ok()) log::Error("admission.count_failed", {{"error", n.status().ToString()}});
    return n.ok() ? *n : 0;
  }
  absl::MutexLock lock(&mu_);
  return queued_;
}

size_t AdmissionQueue::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace sandgate::core
