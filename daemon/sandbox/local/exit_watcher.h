// ExitWatcher: one thread that says when watched processes exit, so that a sandbox that dies
// on its own (its PID 1 or bwrap killed, by the OOM killer or anyone) is known at once, not
// at its next command or its idle timeout.
//
// Processes are watched through pidfds (pidfd_open), which also work for processes that are
// not the daemon's children (a sandbox's init is bwrap's) and never confuse a reused pid.
//
//   SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<ExitWatcher> w, ExitWatcher::Create());
//   uint64_t key = w->Watch(pidfd, [] { /* quick: set a flag, wake someone */ });
//   ...
//   w->Unwatch(key);  // after it returns, the callback is not running and never will
//
// Thread safe. Callbacks run on the watcher's thread, one at a time, with the watcher's lock
// held: they must be quick and must not call Watch or Unwatch.
#ifndef SANDGATE_SANDBOX_LOCAL_EXIT_WATCHER_H_
#define SANDGATE_SANDBOX_LOCAL_EXIT_WATCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {

class ExitWatcher {
 public:
  // The epoll set, its wake-up eventfd and the thread.
  static absl::StatusOr<std::unique_ptr<ExitWatcher>> Create();
  // Stops the thread; callbacks still watched are never called.
  ~ExitWatcher();
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;

  // Calls `exited` once, on the watcher's thread, when the process behind `pidfd` has exited
  // (soon after this call if it already has). `pidfd` is not owned and must stay open until
  // Unwatch. Returns the key for Unwatch; 0 when the pidfd could not be watched (then
  // `exited` is never called, and the owner learns of the exit only when it looks).
  uint64_t Watch(int pidfd, std::function<void()> exited);
  // Forgets `key` (0 and unknown keys are fine). Waits for a callback of it that is running.
  void Unwatch(uint64_t key);

 private:
  ExitWatcher(UniqueFd epoll, UniqueFd wake) : epoll_(std::move(epoll)), wake_(std::move(wake)) {}
  void Loop();

  const UniqueFd epoll_;
  const UniqueFd wake_;  // eventfd: written by the destructor to stop the loop

  absl::Mutex mu_;
  struct Watched {
    int pidfd;
    std::function<void()> exited;
  };
  std::map<uint64_t, Watched> watched_ ABSL_GUARDED_BY(mu_);
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by Create once the members above exist
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_EXIT_WATCHER_H_
