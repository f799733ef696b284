// FairExecutor: a pool of threads for long blocking work that tenants share fairly (Exec
// commands, each holding a thread while it runs).
//
// One global pool let one tenant starve the others: 48 long commands of one tenant held all
// 32 threads and queued the rest, and another tenant's `echo` waited for them. Here each
// tenant has a queue of its own, and:
//  - a tenant with nothing running is always started at once, even when the other tenants
//    hold every one of the `threads` (so at most `threads` + one per tenant run at once, and
//    a tenant's first task never waits for another tenant's to end);
//  - otherwise a task starts when fewer than `threads` run; the next one to start is that of
//    the waiting tenant with the fewest running (ties: round robin by name from the tenant
//    that started last), so a busy tenant's backlog goes after every other tenant's next
//    task and the pool's threads spread evenly over the tenants that want them.
// Each tenant's queue is bounded (`max_queue_per_tenant`): a flood from one tenant is refused
// without taking queue room from the others. Threads are made when a started task finds none
// idle and are kept until Shutdown.
//
//   FairExecutor exec("exec", /*threads=*/32, /*max_queue_per_tenant=*/1024);
//   if (!exec.Submit(caller.tenant, [req] { RunCommand(req); })) return QueueFull();
//
// Thread safe. Shutdown() runs every queued task (under the same rules), then joins; Submit
// after it returns false.
#ifndef SANDGATE_CORE_FAIR_EXECUTOR_H_
#define SANDGATE_CORE_FAIR_EXECUTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace sandgate::core {

class FairExecutor {
 public:
  FairExecutor(std::string name, size_t threads, size_t max_queue_per_tenant);
  ~FairExecutor();  // Shutdown()
  FairExecutor(const FairExecutor&) = delete;
  FairExecutor& operator=(const FairExecutor&) = delete;

  // Queues `task` for `tenant` (started at once when the rules above allow). False when the
  // tenant's queue is full or the executor is shut down; the task is then dropped.
  bool Submit(const std::string& tenant, std::function<void()> task);
  void Shutdown();

  // Tasks running now (started, not yet returned), of all tenants and of one.
  size_t running();
  size_t running(const std::string& tenant);
  // Tasks waiting to start, of all tenants.
  size_t waiting();

 private:
  struct Started {
    std::string tenant;
    std::function<void()> task;
  };
  // Starts every waiting task the rules allow now, in their order.
  void AdmitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  using Queues = std::map<std::string, std::deque<std::function<void()>>>;
  // The queue of the tenant whose task starts next; end() when none may start now.
  Queues::iterator NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  bool LoopWoken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !started_.empty() || (stopping_ && waiting_.empty());
  }

  const std::string name_;
  const size_t threads_max_;
  const size_t max_queue_per_tenant_;
  absl::Mutex mu_;
  Queues waiting_ ABSL_GUARDED_BY(mu_);  // no empty queue
  size_t waiting_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, size_t> running_by_tenant_ ABSL_GUARDED_BY(mu_);  // none at 0
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_tenant_ ABSL_GUARDED_BY(mu_);  // round-robin cursor
  // Admitted (counted in running_), not yet taken by a thread.
  std::deque<Started> started_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads not running a task
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_FAIR_EXECUTOR_H_
