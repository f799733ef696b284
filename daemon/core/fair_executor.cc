#include "core/fair_executor.h"

#include <utility>

namespace sandgate::core {

FairExecutor::FairExecutor(std::string name, size_t threads, size_t max_queue_per_tenant)
    : name_(std::move(name)), threads_max_(threads), max_queue_per_tenant_(max_queue_per_tenant) {}

FairExecutor::~FairExecutor() { Shutdown(); }

bool FairExecutor::Submit(const std::string& tenant, std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  std::deque<std::function<void()>>& queue = waiting_[tenant];
  if (queue.size() >= max_queue_per_tenant_) {
    if (queue.empty()) waiting_.erase(tenant);  // a limit of 0
    return false;
  }
  queue.push_back(std::move(task));
  ++waiting_count_;
  AdmitLocked();
  return true;
}

FairExecutor::Queues::iterator FairExecutor::NextLocked() {
  if (waiting_.empty()) return waiting_.end();
  // Round robin from the tenant after the last one started, wrapping around; the first
  // tenant met with the fewest running wins.
  Queues::iterator start = waiting_.upper_bound(last_tenant_);
  if (start == waiting_.end()) start = waiting_.begin();
  Queues::iterator best = waiting_.end();
  size_t best_running = 0;
  Queues::iterator it = start;
  do {
    auto r = running_by_tenant_.find(it->first);
    const size_t running = r == running_by_tenant_.end() ? 0 : r->second;
    const bool may_start = running == 0 || running_ < threads_max_;
    if (may_start && (best == waiting_.end() || running < best_running)) {
      best = it;
      best_running = running;
    }
    if (++it == waiting_.end()) it = waiting_.begin();
  } while (it != start);
  return best;
}

void FairExecutor::AdmitLocked() {
  for (Queues::iterator next = NextLocked(); next != waiting_.end(); next = NextLocked()) {
    const std::string tenant = next->first;
    started_.push_back({tenant, std::move(next->second.front())});
    next->second.pop_front();
    if (next->second.empty()) waiting_.erase(next);
    --waiting_count_;
    ++running_by_tenant_[tenant];
    ++running_;
    last_tenant_ = tenant;
  }
  // Every admitted task has a thread: the idle ones, and new ones for the rest.
  while (started_.size() > idle_) {
    ++idle_;
    threads_.emplace_back([this] { Loop(); });
  }
}

void FairExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // A task that ends during the drain may start another (and a thread for it): join until
  // none are left.
  for (;;) {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) return;
    for (auto& t : threads) t.join();
  }
}

void FairExecutor::Loop() {
  for (;;) {
    Started next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &FairExecutor::LoopWoken));
      if (started_.empty()) {  // stopping and drained
        --idle_;
        return;
      }
      next = std::move(started_.front());
      started_.pop_front();
      --idle_;
    }
    next.task();
    next.task = nullptr;  // what it holds goes before the next task starts
    absl::MutexLock lock(&mu_);
    ++idle_;
    --running_;
    if (--running_by_tenant_[next.tenant] == 0) running_by_tenant_.erase(next.tenant);
    AdmitLocked();
  }
}

size_t FairExecutor::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

size_t FairExecutor::running(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = running_by_tenant_.find(tenant);
  return it == running_by_tenant_.end() ? 0 : it->second;
}

size_t FairExecutor::waiting() {
  absl::MutexLock lock(&mu_);
  return waiting_count_;
}

}  // namespace sandgate::core
