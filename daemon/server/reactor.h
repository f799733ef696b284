// What every reactor of the gRPC edge shares: authentication, the "queue full" error, the
// lifetime of a write reactor whose work runs on executors, and a stream that only fails.
// Internal to server/.
#ifndef SANDGATE_SERVER_REACTOR_H_
#define SANDGATE_SERVER_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/executor.h"
#include "core/fair_executor.h"
#include "core/tenants.h"
#include "server/service.h"
#include "server/status.h"

namespace sandgate::server {

// The executor's queue of blocking work is at its limit. Says "queue full" so a caller can
// tell it from gRPC's own RESOURCE_EXHAUSTED for a message over the size limit.
absl::Status QueueFull();

// The caller named by the call's "authorization" metadata.
absl::StatusOr<core::Caller> Authenticate(const core::Tenants& tenants,
                                          grpc::CallbackServerContext* ctx);

template <typename T>
class RelayedWriter;  // server/forwarding.h

// Lifetime of a write reactor whose work also runs on executor threads and in EventLog
// callbacks: it is deleted when gRPC is done with it (OnDone) and no such work still holds
// it. Finish is called at most once.
template <typename T>
class PullWriter : public grpc::ServerWriteReactor<T> {
 public:
  void OnDone() override { Release(); }

 protected:
  void Acquire() {
    absl::MutexLock lock(&mu_);
    ++refs_;
  }
  void Release() {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }
  // Runs `fn` on the executor with a reference held; finishes the call if it cannot queue.
  void Schedule(core::Executor* io, std::function<void()> fn) {
    ScheduleWith([io](std::function<void()> task) { return io->Submit(std::move(task)); },
                 std::move(fn));
  }
  // The same in `tenant`'s queue of a FairExecutor.
  void Schedule(core::FairExecutor* exec, const std::string& tenant, std::function<void()> fn) {
    ScheduleWith([exec, &tenant](
                     std::function<void()> task) { return exec->Submit(tenant, std::move(task)); },
                 std::move(fn));
  }
  // `submit` queues a task (false: the queue is full).
  void ScheduleWith(const std::function<bool(std::function<void()>)>& submit,
                    std::function<void()> fn) {
    Acquire();
    if (!submit([this, fn = std::move(fn)] {
          fn();
          Release();
        })) {
      FinishOnce(ToGrpc(QueueFull()));
      Release();
    }
  }
  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    this->Finish(status);
  }
  bool finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }

  absl::Mutex mu_;

 private:
  friend class RelayedWriter<T>;       // finishes the call with the owner's status
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // gRPC's, released in OnDone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// A stream that only reports an error.
template <typename T>
class FailedWriter : public grpc::ServerWriteReactor<T> {
 public:
  explicit FailedWriter(const absl::Status& s) { this->Finish(ToGrpc(s)); }
  void OnDone() override { delete this; }
};

template <typename Reactor, typename Request, typename T>
grpc::ServerWriteReactor<T>* StartStream(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                                         const Request& req) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) return new FailedWriter<T>(caller.status());
  return new Reactor(deps, *caller, req);
}

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REACTOR_H_
