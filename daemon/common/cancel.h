// CancelToken: a one-way "stop now" flag that blocking loops can also wait on.
//
// Thread safe. Cancel() may be called from any thread, any number of times; the first reason
// wins. fd() is an eventfd that becomes readable once cancelled, so an epoll/poll loop can
// include it instead of polling the flag.
//
//   CancelToken token;
//   std::thread t([&] { while (!token.cancelled()) Work(); });
//   token.Cancel("caller asked");
#ifndef SANDGATE_COMMON_CANCEL_H_
#define SANDGATE_COMMON_CANCEL_H_

#include <atomic>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sandgate {

class CancelToken {
 public:
  CancelToken();
  ~CancelToken();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel(std::string reason);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  std::string reason() const;
  // Readable (never drained) once cancelled. Owned by the token.
  int fd() const { return fd_; }
  // Sleeps up to `d`; returns true when cancelled.
  bool WaitFor(absl::Duration d) const;

 private:
  const int fd_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_CANCEL_H_
