// Admission: who runs next when there is more work than room.
//
// Runs wait in one queue per tenant and are admitted round robin across tenants, so a tenant
// with a thousand queued runs delays another tenant's single run by at most one run per
// tenant. A run is admitted only while the global concurrency limit, its tenant's
// concurrency quota and (for a run that needs its own sandbox) the machine's sandbox budget
// all have room. The queue is bounded.
//
//   AdmissionQueue q(/*max_running=*/4, /*max_queued=*/1024, &budget);
//   SANDGATE_RETURN_IF_ERROR(q.Enqueue({run_id, tenant, /*tenant_limit=*/2, true}));
//   for (const auto& t : q.Admit()) Start(t);     // … and when one ends:
//   q.Done(ticket); for (const auto& t : q.Admit()) Start(t);
//
// Thread safe.
#ifndef SANDGATE_CORE_ADMISSION_H_
#define SANDGATE_CORE_ADMISSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sandgate::core {

// Sandboxes alive at once on this machine: a run's own sandbox and every kept session take
// one. Thread safe.
class SandboxBudget {
 public:
  explicit SandboxBudget(uint32_t max) : max_(max) {}
  bool TryTake();
  // Returns one; calls the release listener (outside the lock) so waiting runs can start.
  void Give();
  uint32_t used();
  uint32_t max() const { return max_; }
  void set_on_release(std::function<void()> fn);

 private:
  const uint32_t max_;
  absl::Mutex mu_;
  uint32_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_release_ ABSL_GUARDED_BY(mu_);
};

class AdmissionQueue {
 public:
  struct Ticket {
    std::string run_id;
    std::string tenant;
    uint32_t tenant_limit = 0;  // the tenant's concurrent-run quota; 0 = none
    bool needs_sandbox = true;  // false for runs in a kept session
  };

  AdmissionQueue(uint32_t max_running, uint32_t max_queued, SandboxBudget* budget)
      : max_running_(max_running), max_queued_(max_queued), budget_(budget) {}

  // RESOURCE_EXHAUSTED naming the limit when the queue is full.
  absl::Status Enqueue(Ticket ticket);
  // Takes a waiting run out (cancelled before it started); false if it is not waiting.
  bool Remove(const std::string& run_id);
  // Admits every run the limits allow now, in fair order.
  std::vector<Ticket> Admit();
  // An admitted run has ended; its room (and sandbox, if it took one) is free again.
  void Done(const Ticket& ticket);
  // Waiting runs in the order they would be admitted if room appeared one run at a time.
  std::vector<std::string> Order();
  size_t waiting();
  size_t running();

 private:
  bool CanAdmit(const std::string& tenant, uint32_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t max_running_;
  const uint32_t max_queued_;
  SandboxBudget* const budget_;  // not owned
  absl::Mutex mu_;
  std::map<std::string, std::deque<Ticket>> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> running_by_tenant_ ABSL_GUARDED_BY(mu_);
  uint32_t running_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_tenant_ ABSL_GUARDED_BY(mu_);  // round-robin cursor
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_ADMISSION_H_
