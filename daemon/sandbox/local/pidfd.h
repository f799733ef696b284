// Small process helpers shared by the files of a local session (bwrap_session.cc,
// gvisor_session.cc, session_commands.cc): pidfds, poll deadlines and a failed runtime's
// stderr. Thread safe (syscalls only).
#ifndef SANDGATE_SANDBOX_LOCAL_PIDFD_H_
#define SANDGATE_SANDBOX_LOCAL_PIDFD_H_

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {

inline int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

inline void PidfdKill(const UniqueFd& pidfd) {
  if (pidfd.valid()) syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
}

// poll()'s timeout for waiting until `deadline`: -1 for none, rounded up so that a wait never
// ends before it.
inline int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits until the process behind `pidfd` has exited; false on timeout.
inline bool WaitExit(const UniqueFd& pidfd, absl::Duration timeout) {
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  int r;
  while ((r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)))) < 0 &&
         errno == EINTR) {
  }
  return r > 0;
}

// What a non-blocking pipe holds (at most 16 KiB), trailing whitespace stripped.
inline std::string DrainText(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while (text.size() < 16384 && (n = read(fd, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_PIDFD_H_
