#include "client/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <thread>

namespace sandgate::cli {

Interrupt& Interrupt::Install(int second_signal_exit) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Never destroyed: the waiting thread uses it until the process exits.
  static Interrupt* const interrupt = new Interrupt(second_signal_exit);
  std::thread([set] {
    int sig = 0;
    for (int received = 0; sigwait(&set, &sig) == 0; ++received) {
      if (received > 0) {
        static constexpr char kMsg[] = "\nsandgate: interrupted again; exiting\n";
        (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
        _exit(interrupt->second_signal_exit_);
      }
      interrupt->Fire();
    }
  }).detach();
  return *interrupt;
}

void Interrupt::Fire() {
  absl::MutexLock lock(&mu_);
  fired_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

void Interrupt::Watch(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  ctx_ = ctx;
  if (fired_ && ctx_ != nullptr) ctx_->TryCancel();
}

bool Interrupt::fired() {
  absl::MutexLock lock(&mu_);
  return fired_;
}

}  // namespace sandgate::cli
