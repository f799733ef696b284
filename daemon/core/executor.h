// Executor: a bounded pool of threads for blocking work (sandbox calls, SQLite, files).
//
// gRPC reactions never block; they hand work to an Executor. The queue is bounded so that a
// flood of requests is refused (Submit returns false) instead of growing memory.
//
// Thread safe. Shutdown() runs what is queued, then joins; Submit after it returns false.
#ifndef SANDGATE_CORE_EXECUTOR_H_
#define SANDGATE_CORE_EXECUTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace sandgate::core {

class Executor {
 public:
  Executor(std::string name, size_t threads, size_t max_queue);
  ~Executor();  // Shutdown()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // False when the queue is full or the executor is shut down; the task is then dropped.
  bool Submit(std::function<void()> task);
  void Shutdown();

 private:
  void Loop();

  const std::string name_;
  const size_t max_queue_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_EXECUTOR_H_
