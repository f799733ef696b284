// Ctrl-C, SIGTERM and a closed terminal (SIGHUP) for the CLI.
//
// A signal goes to any thread that does not block it, and gRPC starts its own threads as
// soon as a channel exists: blocking the signals later, in the thread that waits, leaves
// them to gRPC's threads, whose default action kills the process (no detach message, no
// --cancel-on-exit). So Interrupt::Install blocks them first thing in main, before any
// thread exists (every later thread inherits the mask), and one thread takes them with
// sigwait; no signal handler runs. The first signal cancels the watched call (TryCancel from
// that ordinary thread, never from a handler) so the command can detach or cancel the run;
// a second one exits at once with `second_signal_exit` (the command's own cleanup hung).
//
//   int main(int argc, char** argv) {
//     Interrupt& interrupt = Interrupt::Install(130);   // before anything else
//     ...
//     interrupt.Watch(&ctx);  reader->Read(...);  interrupt.Watch(nullptr);
//     if (interrupt.fired()) ...
//
// Thread safe.
#ifndef SANDGATE_CLIENT_INTERRUPT_H_
#define SANDGATE_CLIENT_INTERRUPT_H_

#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sandgate::cli {

class Interrupt {
 public:
  // Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and starts the one thread that
  // takes them. Call once, first in main, while no other thread exists. The object lives
  // until the process exits.
  static Interrupt& Install(int second_signal_exit);

  // The call that the first signal cancels (nullptr: none). `ctx` must stay alive until it
  // is replaced; a signal that came before cancels it at once.
  void Watch(grpc::ClientContext* ctx);
  bool fired();

 private:
  explicit Interrupt(int second_signal_exit) : second_signal_exit_(second_signal_exit) {}
  void Fire();

  const int second_signal_exit_;
  absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_INTERRUPT_H_
