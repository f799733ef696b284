#include "sandbox/exec_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/errors.h"

namespace sandgate::sandbox {

namespace {

struct NamedSignal {
  const char* name;
  int number;
};
constexpr NamedSignal kSignals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                                    {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
                                    {"USR2", SIGUSR2}};

int PollTimeoutMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
}

}  // namespace

absl::StatusOr<int> ParseSignal(absl::string_view name) {
  absl::string_view bare = name;
  if (absl::StartsWith(bare, "SIG")) bare.remove_prefix(3);
  for (const NamedSignal& s : kSignals) {
    if (bare == s.name) return s.number;
  }
  return errors::InvalidArgument(
      absl::StrCat("signal: \"", name,
                   "\" is not one of SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGUSR1, "
                   "SIGUSR2"));
}

void ExecChannel::Attach(UniqueFd stdin_fd, bool tty, std::function<absl::Status(int)> signal) {
  if (stdin_fd.valid()) fcntl(stdin_fd.get(), F_SETFL, O_NONBLOCK);
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  attached_ = true;
  tty_ = tty;
  stdin_ = std::move(stdin_fd);
  signal_ = std::move(signal);
}

void ExecChannel::Detach() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  attached_ = false;
  stdin_.reset();
  signal_ = nullptr;
}

absl::Status ExecChannel::AwaitAttached(absl::Duration wait) {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attached_ || ended_; };
  Clock::Real()->AwaitWithDeadline(mu_, absl::Condition(&ready), absl::Now() + wait);
  if (ended_) return errors::FailedPrecondition("the process has ended");
  if (!attached_) return errors::Unavailable("the process has not started yet");
  return absl::OkStatus();
}

absl::StatusOr<size_t> ExecChannel::WriteStdin(absl::string_view data, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  UniqueFd fd;
  {
    absl::MutexLock lock(&mu_);
    absl::Status attached = AwaitAttached(wait);
    if (!attached.ok()) return attached;
    if (stdin_closed_ || !stdin_.valid()) return errors::FailedPrecondition("stdin is closed");
    // A dup, so that the wait for room below holds no lock (Detach need not wait for it).
    fd.reset(fcntl(stdin_.get(), F_DUPFD_CLOEXEC, 0));
    if (!fd.valid()) return errors::FromErrno(errno, "dup stdin");
  }
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = write(fd.get(), data.data() + written, data.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) {
      if (written > 0) break;
      return errors::FailedPrecondition("the process closed its stdin");
    }
    if (n < 0 && errno != EAGAIN) return errors::FromErrno(errno, "write stdin");
    struct pollfd p = {fd.get(), POLLOUT, 0};
    if (absl::Now() >= deadline || poll(&p, 1, PollTimeoutMs(deadline)) <= 0) break;
  }
  return written;
}

absl::Status ExecChannel::CloseStdin(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  absl::MutexLock closing(&close_mu_);  // one ^D, however many callers at once
  {
    absl::MutexLock lock(&mu_);
    absl::Status attached = AwaitAttached(wait);
    if (!attached.ok()) return attached;
    if (stdin_closed_) return absl::OkStatus();
    if (!tty_) {
      stdin_closed_ = true;
      stdin_.reset();
      return absl::OkStatus();
    }
  }
  // The terminal stays (its master is the output too): EOF is the line discipline's ^D, a key
  // like any other, written when the terminal has room for it. Stdin is closed once it is.
  absl::StatusOr<size_t> eof = WriteStdin("\x04", deadline - absl::Now());
  if (!eof.ok()) return eof.status();
  if (*eof != 1) {
    return errors::Unavailable(
        "the terminal's input is full (the process does not read it): ^D not written");
  }
  absl::MutexLock lock(&mu_);
  stdin_closed_ = true;
  return absl::OkStatus();
}

absl::Status ExecChannel::Signal(int signal, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  absl::Status attached = AwaitAttached(wait);
  if (!attached.ok()) return attached;
  return signal_(signal);
}

absl::Status ExecChannel::Resize(TerminalSize size, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  absl::Status attached = AwaitAttached(wait);
  if (!attached.ok()) return attached;
  if (!tty_) return errors::FailedPrecondition("the process has no terminal (start it with a pty)");
  struct winsize ws = {};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (ioctl(stdin_.get(), TIOCSWINSZ, &ws) != 0) return errors::FromErrno(errno, "resize");
  return absl::OkStatus();
}

}  // namespace sandgate::sandbox
