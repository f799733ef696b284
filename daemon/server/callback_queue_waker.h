// CallbackQueueWaker: keeps one of gRPC's callback threads waiting for work, so a reactor's
// completion (a stream's OnWriteDone above all) runs when it happens, not up to 100 ms later.
//
// Why: with the gRPC this daemon builds against (1.51, Linux epoll1 poller, where
// grpc_iomgr_run_in_background() is false) every callback reactor of the process (our
// server's OnWriteDone, OnDone, OnCancel, and callback clients' completions) is run by the
// threads of one process-wide queue, CallbackAlternativeCQ (src/cpp/common/
// completion_queue_cc.cc): max(2, cores / 2) threads that each wait at most 1 s for a
// completion and, when none came, sleep 100 ms before waiting again. A completion that
// arrives while they all sleep waits for the nap to end. Measured (BENCHMARKS.md, "Followers
// on another replica"): a follower's first event after a quiet second was sent at once, but
// its OnWriteDone came 60-100 ms later, and the events behind it waited for that.
//
// The waker makes a completion on that queue every `period` (under 1 s): the thread that
// takes it never waits a full second, so one is always waiting. The completion is a unary
// call cancelled before it starts, on a channel that cannot connect anyway (a socket path
// under /proc, where no file can be made): it ends in the client at once, never reaches a
// server (nor our metrics), and its callback is one completion on the queue. An idle daemon
// used about 1 ms of CPU a second more with it (8 against 5 ticks of 10 ms in 40 s); without
// the cancel, where each call tried the channel, about 2 ms.
//
//   CallbackQueueWaker waker(Clock::Real());   // for the server's lifetime
//
// Thread safe. The destructor stops the timer thread and waits for a call in flight.
#ifndef SANDGATE_SERVER_CALLBACK_QUEUE_WAKER_H_
#define SANDGATE_SERVER_CALLBACK_QUEUE_WAKER_H_

#include <grpcpp/generic/generic_stub.h>

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/clock.h"

namespace sandgate::server {

class CallbackQueueWaker {
 public:
  // A completion every `period` of `clock` (which outlives the waker).
  explicit CallbackQueueWaker(Clock* clock, absl::Duration period = absl::Milliseconds(250));
  ~CallbackQueueWaker();
  CallbackQueueWaker(const CallbackQueueWaker&) = delete;
  CallbackQueueWaker& operator=(const CallbackQueueWaker&) = delete;

  // Completions so far (each call's callback has run).
  int64_t completions() const;
  // For tests: waits, in real time up to `timeout`, until completions() >= n; returns
  // whether it got there.
  bool AwaitCompletions(int64_t n, absl::Duration timeout) const;

 private:
  void Loop();
  // Starts a call unless one is in flight (a slow failure must not pile calls up).
  void Tick();

  Clock* const clock_;
  const absl::Duration period_;
  grpc::GenericStub stub_;
  CancelToken stop_;
  mutable absl::Mutex mu_;
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request, response;
  };
  std::unique_ptr<Call> call_ ABSL_GUARDED_BY(mu_);  // the last one started
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  int64_t completions_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_CALLBACK_QUEUE_WAKER_H_
