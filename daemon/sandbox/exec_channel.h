// ExecChannel: what a caller says to a command while Session::Exec runs it — its stdin, its
// terminal's size, signals — from any thread, while Exec's own thread reads its output.
//
//   auto channel = std::make_shared<ExecChannel>();
//   ExecRequest req{.argv = {"cat"}};
//   req.channel = channel;  // stdin is a pipe now, not /dev/null
//   std::thread t([&] { session->Exec(req, on_output, &cancel); });
//   channel->WriteStdin("hi\n", absl::Seconds(5));
//   channel->CloseStdin();  // cat sees EOF and exits
//   t.join();
//
// The provider attaches the command when it starts and detaches it when Exec returns; calls
// before the start wait for it (up to their `wait`), calls after the end are
// FAILED_PRECONDITION. Thread safe.
#ifndef SANDGATE_SANDBOX_EXEC_CHANNEL_H_
#define SANDGATE_SANDBOX_EXEC_CHANNEL_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox {

struct TerminalSize {
  uint16_t rows = 24;
  uint16_t cols = 80;
};

// The signals a caller may send to a command's process group, by name ("SIGINT" or "INT"):
// SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGUSR1, SIGUSR2. INVALID_ARGUMENT naming the
// allowed ones otherwise.
absl::StatusOr<int> ParseSignal(absl::string_view name);

class ExecChannel {
 public:
  ExecChannel() = default;
  ExecChannel(const ExecChannel&) = delete;
  ExecChannel& operator=(const ExecChannel&) = delete;

  // Caller side.
  // Writes `data` to the command's stdin (its terminal with a pty), waiting up to `wait`
  // for the command to start and for room in the pipe. Returns the bytes written: fewer
  // than asked when the command does not read. FAILED_PRECONDITION once stdin is closed or
  // the command ended.
  absl::StatusOr<size_t> WriteStdin(absl::string_view data, absl::Duration wait);
  // EOF on stdin (with a pty: the terminal's EOF character, ^D, at the start of a line).
  // With a pty, ^D and the size are the terminal's, taken as the program reads its terminal:
  // readline (python3 -i, bash) turns a ^D that arrives while it runs a line into a NUL, and
  // writes back the size it read each time it shows its prompt, undoing a resize that lands
  // in between; send both once the prompt has shown. The ^D waits for room as WriteStdin
  // does: UNAVAILABLE, and stdin still open, when the terminal's input stays full.
  absl::Status CloseStdin(absl::Duration wait);
  // Sends `signal` (ParseSignal's set) to the command's process group.
  absl::Status Signal(int signal, absl::Duration wait);
  // FAILED_PRECONDITION without a pty.
  absl::Status Resize(TerminalSize size, absl::Duration wait);

  // Provider side. `stdin_fd`: the pipe's write end, or a dup of the pty's master (then
  // `tty` is true); `signal` sends a signal (valid until Detach).
  void Attach(UniqueFd stdin_fd, bool tty, std::function<absl::Status(int)> signal);
  // The command ended (or never started): every later call fails, waiting ones return.
  void Detach();

 private:
  // Waits, with mu_ held, until attached or ended; FAILED_PRECONDITION when ended.
  absl::Status AwaitAttached(absl::Duration wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex close_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // held through a CloseStdin
  absl::Mutex mu_;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool tty_ ABSL_GUARDED_BY(mu_) = false;
  bool stdin_closed_ ABSL_GUARDED_BY(mu_) = false;
  UniqueFd stdin_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(int)> signal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_EXEC_CHANNEL_H_
