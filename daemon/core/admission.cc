#include "core/admission.h"

#include "common/log.h"
#include "common/status_macros.h"
#include "store/sqlite_admission_store.h"

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

namespace {

// A queue of one daemon's own: its replica id names its claims (a claim by "" would be none).
AdmissionQueue::Shared OwnOrShared(AdmissionQueue::Shared shared) {
  if (shared.replica.empty()) shared.replica = "here";
  if (shared.clock == nullptr) shared.clock = Clock::Real();
  return shared;
}

}  // namespace

AdmissionQueue::AdmissionQueue(uint32_t max_running, uint32_t max_queued, SandboxBudget* budget,
                               Shared shared)
    : max_running_(max_running),
      max_queued_(max_queued),
      budget_(budget),
      shared_(OwnOrShared(std::move(shared))),
      // An in-memory database opens unless the process is out of memory.
      own_(shared_.store != nullptr ? nullptr : *store::SqliteAdmissionStore::Open(":memory:")),
      store_(shared_.store != nullptr ? shared_.store : own_.get()) {}

absl::StatusOr<bool> AdmissionQueue::Enqueue(Ticket ticket, bool only_here, v1::Event* queued) {
  const store::QueuedRun row{ticket.run_id,
                             ticket.tenant,
                             ticket.tenant_limit,
                             ticket.needs_sandbox,
                             only_here ? shared_.replica : "",
                             shared_.replica,
                             shared_.clock->Now(),
                             ""};
  // As in Admit: the room is this replica's, a sandbox in hand before the claim.
  const bool may_claim = MayClaim();
  absl::MutexLock claiming(&claim_mu_);
  store::RoomHere room;
  {
    absl::MutexLock lock(&mu_);
    room.run_slot = may_claim && running_ < max_running_;
  }
  room.sandbox = room.run_slot && budget_->TryTake();
  absl::StatusOr<bool> claimed = store_->Enqueue(row, max_queued_, room, queued);
  if (room.sandbox && (!claimed.ok() || !*claimed || !ticket.needs_sandbox)) budget_->Untake();
  if (!claimed.ok() || !*claimed) return claimed;
  absl::MutexLock lock(&mu_);
  ++running_;
  claimed_here_.emplace(ticket.run_id, shared_.replica);
  return true;
}

bool AdmissionQueue::Remove(const std::string& run_id) {
  absl::StatusOr<bool> removed = store_->Remove(run_id);
  if (!removed.ok()) {
    log::Error("admission.remove_failed",
               {{"run", run_id}, {"error", removed.status().ToString()}});
  }
  return removed.ok() && *removed;
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

std::vector<AdmissionQueue::Ticket> AdmissionQueue::Admit() {
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
        store_->Claim(shared_.replica, sandbox);
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

void AdmissionQueue::Done(const Ticket& ticket) {
  // A store error (a restart of the database, a blip) must not leave the slot taken while
  // this replica goes on. A run whose record became final freed its slot with it (the
  // finish's trigger), and a takeover's settling commit frees the rest: this finds nothing.
  const absl::Time give_up = shared_.clock->Now() + kReleaseRetryFor;
  for (absl::Duration wait = kReleaseRetryFirst;; wait = std::min(2 * wait, kReleaseRetryMost)) {
    absl::Status released = store_->Release(ticket.run_id);
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
  absl::StatusOr<store::WaitingRuns> waiting = store_->Waiting();
  if (!waiting.ok()) {
    log::Error("admission.list_failed", {{"error", waiting.status().ToString()}});
    return {};
  }
  std::map<std::string, std::vector<std::string>> by_tenant;
  for (const store::QueuedRun& r : waiting->runs) by_tenant[r.tenant].push_back(r.run_id);
  if (plus != nullptr) by_tenant[plus->tenant].push_back(plus->run_id);
  return RoundRobinOrder(by_tenant, waiting->last_tenant);
}

size_t AdmissionQueue::waiting() {
  absl::StatusOr<uint64_t> n = store_->WaitingCount();
  if (!n.ok()) log::Error("admission.count_failed", {{"error", n.status().ToString()}});
  return n.ok() ? *n : 0;
}

size_t AdmissionQueue::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace sandgate::core
