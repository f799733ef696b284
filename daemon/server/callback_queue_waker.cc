#include "server/callback_queue_waker.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

namespace sandgate::server {

namespace {

// No file can be made under /proc/self: the connect fails at once, every time.
constexpr char kNowhere[] = "unix:/proc/self/sandgate-callback-queue-waker";

std::shared_ptr<grpc::Channel> NowhereChannel() {
  return grpc::CreateChannel(kNowhere, grpc::InsecureChannelCredentials());
}

}  // namespace

CallbackQueueWaker::CallbackQueueWaker(Clock* clock, absl::Duration period)
    : clock_(clock), period_(period), stub_(NowhereChannel()), thread_([this] { Loop(); }) {}

CallbackQueueWaker::~CallbackQueueWaker() {
  stop_.Cancel("the waker is destroyed");
  thread_.join();
  // The call's callback uses this object: it must have run.
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !in_flight_; };
  mu_.Await(absl::Condition(&done));
}

void CallbackQueueWaker::Loop() {
  while (!clock_->SleepFor(period_, &stop_)) Tick();
}

void CallbackQueueWaker::Tick() {
  Call* call;
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_) return;
    in_flight_ = true;
    // The last call's context is freed here, on this thread, once its callback has run, not
    // from inside gRPC's teardown of the call. Only this thread replaces call_.
    call_ = std::make_unique<Call>();
    call = call_.get();
  }
  // An empty message (a ByteBuffer never filled is no message at all: gRPC refuses it).
  grpc::Slice empty;
  call->request = grpc::ByteBuffer(&empty, 1);
  // Cancelled before it starts: it ends without picking a connection. The deadline only
  // bounds a call that, against expectation, would not end.
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  call->context.TryCancel();
  // Not under mu_: the callback takes it.
  stub_.UnaryCall(&call->context, "/sandgate.internal.CallbackQueueWaker/Wake", grpc::StubOptions(),
                  &call->request, &call->response, [this](const grpc::Status&) {
                    absl::MutexLock lock(&mu_);
                    in_flight_ = false;
                    ++completions_;
                  });
}

int64_t CallbackQueueWaker::completions() const {
  absl::MutexLock lock(&mu_);
  return completions_;
}

bool CallbackQueueWaker::AwaitCompletions(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completions_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace sandgate::server
