// The commands of a local session, the same for both runtimes (bwrap_session.h): Exec and
// ConnectPort speak the init's protocol (init_protocol.h) on the session's control socket,
// which under gVisor is the tunnel's end (gvisor_tunnel.h). The sandbox's start and end are
// bwrap_session.cc's and gvisor_session.cc's.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "sandbox/local/bwrap_session.h"
#include "sandbox/local/fd_passing.h"
#include "sandbox/local/init_protocol.h"
#include "sandbox/local/pidfd.h"

namespace sandgate::sandbox::local {
namespace {

using initproto::MessageHeader;

absl::Status CheckNoNul(absl::string_view s, absl::string_view what) {
  if (s.find('\0') != absl::string_view::npos) {
    return errors::InvalidArgument(absl::StrCat(what, ": contains a NUL byte"));
  }
  return absl::OkStatus();
}

// The bridge's tunnel (bridge_protocol.h) carries bytes, not the terminal's descriptor.
absl::Status GvisorHasNoTerminals() {
  return errors::FailedPrecondition(
      "pty: a terminal is not available under isolation gvisor (its tunnel cannot carry the "
      "terminal); run the process without a terminal (stdin still works), or use a session "
      "with isolation namespaces");
}

// The kExec message: header, cwd, argv, env (see init_protocol.h).
absl::StatusOr<std::string> EncodeExec(const ExecRequest& req, const SessionSpec& spec,
                                       uint16_t proxy_port) {
  const std::map<std::string, std::string>& session_env = spec.env;
  if (req.argv.empty()) return errors::InvalidArgument("argv: must not be empty");
  if (req.pty && req.channel == nullptr) {
    return errors::InvalidArgument("pty: a terminal needs a channel to talk to it");
  }
  if (req.pty && (req.pty->rows == 0 || req.pty->cols == 0)) {
    return errors::InvalidArgument("pty: rows and cols must be at least 1");
  }
  if (req.pty && spec.isolation == Isolation::kGvisor) return GvisorHasNoTerminals();
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", "/work"},
                                            {"LANG", "C.UTF-8"},
                                            {"PYTHONUNBUFFERED", "1"}};
  for (const auto& [k, v] : session_env) env[k] = v;
  for (const auto& [k, v] : req.env) env[k] = v;
  if (spec.network.mode != NetworkMode::kDisabled) {
    // Over both: the proxy is the only way out, so a command must always be told of it.
    const std::string proxy = absl::StrCat("http://127.0.0.1:", proxy_port);
    for (const char* name :
         {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}) {
      env[name] = proxy;
    }
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1";
  }
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> cwd, SplitWorkspacePath(req.cwd, true));
  MessageHeader h;
  h.type = initproto::kExec;
  h.argc = static_cast<uint32_t>(req.argv.size());
  h.envc = static_cast<uint32_t>(env.size());
  h.cpu_seconds = spec.cpu_seconds_per_process;
  if (req.pty) {
    h.flags = initproto::kExecPty;
    h.rows = req.pty->rows;
    h.cols = req.pty->cols;
  } else if (req.channel != nullptr) {
    h.flags = initproto::kExecStdinPipe;
  }
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  absl::StrAppend(&msg, "/work", cwd.empty() ? "" : "/", absl::StrJoin(cwd, "/"),
                  absl::string_view("\0", 1));
  for (const std::string& a : req.argv) {
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(a, "argv"));
    absl::StrAppend(&msg, a, absl::string_view("\0", 1));
  }
  for (const auto& [k, v] : env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return errors::InvalidArgument(absl::StrCat("env: invalid variable name \"", k, "\""));
    }
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(k, "env"));
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(v, absl::StrCat("env ", k)));
    absl::StrAppend(&msg, k, "=", v, absl::string_view("\0", 1));
  }
  if (msg.size() > initproto::kMaxExecMessage) {
    return errors::InvalidArgument(
        absl::StrCat("argv and env together exceed ", initproto::kMaxExecMessage, " bytes"));
  }
  return msg;
}

// Receives one message of a command socket, and the fd it carries, if any (kStarted of a
// command on a terminal). As recv.
ssize_t ReceiveWithFd(int sock, MessageHeader* h, UniqueFd* fd) {
  int fds[fdpass::kMaxFds];
  size_t count = 0;
  ssize_t n = fdpass::Receive(sock, h, sizeof(*h), fds, &count, MSG_DONTWAIT);
  for (size_t i = 0; i < count; ++i) {
    if (i == 0) {
      fd->reset(fds[i]);
    } else {
      close(fds[i]);  // more than the one expected: not kept
    }
  }
  return n;
}

// A connect to an exposed port that failed: nothing listens there (the usual case), or why.
absl::Status PortRefused(const std::string& where, int err) {
  if (err == ECONNREFUSED) {
    return errors::FailedPrecondition(absl::StrCat("nothing listens on ", where));
  }
  return errors::Unavailable(absl::StrCat("cannot connect to ", where, ": ", strerror(err)));
}

// One output pipe of a running command, with its byte cap.
struct OutputPipe {
  UniqueFd fd;
  OutputStream stream;
  uint64_t delivered = 0;
  bool truncated = false;

  // Reads what is there; returns false at EOF (for a terminal's master: EIO, once every
  // holder of its slave is gone).
  bool Read(uint64_t cap, const OutputCallback& on_output) {
    char buf[65536];
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    uint64_t keep = std::min<uint64_t>(static_cast<uint64_t>(n), cap - delivered);
    if (keep < static_cast<uint64_t>(n)) truncated = true;
    if (keep > 0 && on_output) on_output(stream, absl::string_view(buf, keep));
    delivered += keep;
    return true;
  }
};

}  // namespace

absl::Status BwrapSession::TerminalsAvailable() const {
  return gvisor() ? GvisorHasNoTerminals() : absl::OkStatus();
}

absl::Status BwrapSession::SendExec(const std::string& message, int cmd_fd, int out_fd, int err_fd,
                                    int in_fd) {
  std::vector<int> fds = {cmd_fd, out_fd, err_fd};
  if (in_fd >= 0) fds.push_back(in_fd);
  return SendControl(message, fds);
}

absl::Status BwrapSession::SendControl(const std::string& message, const std::vector<int>& fds) {
  absl::MutexLock l(&send_mu_);
  const ssize_t n =
      fdpass::Send(control_.get(), message.data(), message.size(), fds.data(), fds.size());
  if (n < 0)
    return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " is gone: ", strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> BwrapSession::ConnectPort(uint16_t port, absl::Duration timeout) {
  {
    absl::MutexLock l(&mu_);
    if (closed_)
      return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
  }
  if (Exited()) return DeadError();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  UniqueFd reply(sv[0]), reply_remote(sv[1]);
  MessageHeader m;
  m.type = initproto::kConnect;
  m.value = port;
  SANDGATE_RETURN_IF_ERROR(
      SendControl(std::string(reinterpret_cast<const char*>(&m), sizeof(m)), {reply_remote.get()}));
  reply_remote.reset();
  const absl::Time deadline = absl::Now() + timeout;
  const std::string where = absl::StrCat("127.0.0.1:", port, " in session ", spec_.id);
  UniqueFd conn;
  for (;;) {
    struct pollfd p = {reply.get(), POLLIN, 0};
    int r = poll(&p, 1, PollTimeoutMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errors::FromErrno(errno, "poll");
    if (r == 0)
      return errors::DeadlineExceeded(absl::StrCat("no connection to ", where, " in time"));
    MessageHeader h;
    ssize_t n = ReceiveWithFd(reply.get(), &h, &conn);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kConnected && conn.valid()) {
      break;
    }
    if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kFailed) {
      return PortRefused(where, h.value);
    }
    return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " did not answer the connect"));
  }
  // A namespaces sandbox hands over the TCP socket itself, its connect perhaps under way;
  // a gVisor one, the bridge's relay of a connection already made.
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(conn.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_INET) {
    struct pollfd p = {conn.get(), POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, PollTimeoutMs(deadline));
    } while (r < 0 && errno == EINTR);
    if (r == 0)
      return errors::DeadlineExceeded(absl::StrCat("no connection to ", where, " in time"));
    int err = 0;
    len = sizeof(err);
    if (getsockopt(conn.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return PortRefused(where, err);
  }
  fcntl(conn.get(), F_SETFL, O_NONBLOCK);
  return conn;
}

absl::StatusOr<ExecResult> BwrapSession::Exec(const ExecRequest& request,
                                              const OutputCallback& on_output,
                                              const CancelToken* cancel) {
  // Whatever happens below, the caller's channel learns the command is over.
  auto detach = absl::MakeCleanup([&request] {
    if (request.channel != nullptr) request.channel->Detach();
  });
  SANDGATE_ASSIGN_OR_RETURN(std::string message,
                            EncodeExec(request, spec_, core_->options.proxy_port));
  {
    absl::MutexLock l(&mu_);
    if (closed_)
      return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
  }
  if (Exited()) return DeadError();
  int sv[2], po[2], pe[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  UniqueFd cmd(sv[0]), cmd_remote(sv[1]);
  if (pipe2(po, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  OutputPipe out{UniqueFd(po[0]), OutputStream::kStdout};
  UniqueFd out_w(po[1]);
  if (pipe2(pe, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  OutputPipe err{UniqueFd(pe[0]), OutputStream::kStderr};
  UniqueFd err_w(pe[1]);
  fcntl(out.fd.get(), F_SETFL, O_NONBLOCK);
  fcntl(err.fd.get(), F_SETFL, O_NONBLOCK);
  UniqueFd in_r, in_w;
  if (request.channel != nullptr && !request.pty) {
    int pi[2];
    if (pipe2(pi, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
    in_r.reset(pi[0]);
    in_w.reset(pi[1]);
  }
  // The channel signals through its own copy of the command socket, so that it never
  // writes to a number this function closed and something else reused.
  std::function<absl::Status(int)> signal_command;
  if (request.channel != nullptr) {
    auto sock = std::make_shared<UniqueFd>(fcntl(cmd.get(), F_DUPFD_CLOEXEC, 0));
    if (!sock->valid()) return errors::FromErrno(errno, "dup");
    signal_command = [sock](int signal) {
      MessageHeader m;
      m.type = initproto::kSignal;
      m.value = signal;
      if (send(sock->get(), &m, sizeof(m), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(m))) {
        return errors::FailedPrecondition("the process has ended");
      }
      return absl::OkStatus();
    };
  }
  std::optional<OutputPipe> tty;  // the terminal's master, once started (pty)

  const uint64_t oom_before = cgroups_.OomKillCount();
  const absl::Time start = absl::Now();
  absl::Status sent = SendExec(message, cmd_remote.get(), out_w.get(), err_w.get(), in_r.get());
  if (!sent.ok()) {
    {
      absl::MutexLock l(&mu_);
      if (closed_)
        return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
    }
    // The init hung up: it is exiting (its pidfd is readable right after).
    if (WaitExit(init_pidfd_, absl::Seconds(1))) return DeadError();
    return sent;
  }
  // Only the command may hold the write ends now, so EOF means it (and its heirs) are done.
  cmd_remote.reset();
  out_w.reset();
  err_w.reset();
  in_r.reset();
  if (in_w.valid()) request.channel->Attach(std::move(in_w), false, signal_command);

  ExecResult result;
  const absl::Time deadline = start + request.timeout;
  absl::Time drain_deadline = absl::InfiniteFuture();
  absl::Time kill_deadline = absl::InfiniteFuture();
  bool out_open = true, err_open = true, have_status = false, kill_sent = false;
  int status = 0;
  auto send_kill = [&](bool all) {
    MessageHeader k;
    k.type = all ? initproto::kKillAll : initproto::kKill;
    send(cmd.get(), &k, sizeof(k), MSG_NOSIGNAL);
    kill_sent = true;
    kill_deadline = absl::Now() + absl::Seconds(5);
  };
  for (;;) {
    if (have_status && !out_open && !err_open && !tty) break;
    const absl::Time now = absl::Now();
    if (have_status && now >= drain_deadline) break;
    if (!have_status && !kill_sent) {
      if (now >= deadline) {
        result.timed_out = true;
        send_kill(true);
      } else if (cancel != nullptr && cancel->cancelled()) {
        result.cancelled = true;
        send_kill(false);
      }
    }
    if (!have_status && now >= kill_deadline) {
      return errors::Internal(
          absl::StrCat("command in session ", spec_.id, " did not end after SIGKILL"));
    }
    struct pollfd p[5] = {{out_open ? out.fd.get() : -1, POLLIN, 0},
                          {err_open ? err.fd.get() : -1, POLLIN, 0},
                          {have_status ? -1 : cmd.get(), POLLIN, 0},
                          {cancel != nullptr && !kill_sent ? cancel->fd() : -1, POLLIN, 0},
                          {tty ? tty->fd.get() : -1, POLLIN, 0}};
    absl::Time wake = std::min({kill_sent ? kill_deadline : deadline, drain_deadline});
    int r = poll(p, 5, PollTimeoutMs(wake));
    if (r < 0 && errno != EINTR) return errors::FromErrno(errno, "poll");
    if (r <= 0) continue;
    if (p[0].revents != 0) out_open = out.Read(request.output_cap_bytes, on_output);
    if (p[1].revents != 0) err_open = err.Read(request.output_cap_bytes, on_output);
    if (p[4].revents != 0 && !tty->Read(request.output_cap_bytes, on_output)) {
      result.stdout_truncated = tty->truncated;
      tty.reset();
    }
    if (p[2].revents != 0) {
      MessageHeader h;
      UniqueFd master;
      ssize_t n = ReceiveWithFd(cmd.get(), &h, &master);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kStarted) {
        if (request.pty && master.valid()) {
          fcntl(master.get(), F_SETFL, O_NONBLOCK);
          UniqueFd input(fcntl(master.get(), F_DUPFD_CLOEXEC, 0));
          tty.emplace(OutputPipe{std::move(master), OutputStream::kStdout});
          request.channel->Attach(std::move(input), true, signal_command);
        }
        continue;
      }
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kExited) {
        have_status = true;
        status = h.value;
        // Background processes may keep the pipes open; do not wait for them for long.
        drain_deadline = absl::Now() + absl::Milliseconds(250);
        continue;
      }
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kFailed) {
        return errors::FromErrno(h.value,
                                 absl::StrCat("sandbox init could not start ", request.argv[0]));
      }
      // EOF: the init is gone, so is the command.
      bool closed;
      {
        absl::MutexLock l(&mu_);
        closed = closed_;
      }
      if (!closed) {
        if (WaitExit(init_pidfd_, absl::Seconds(1))) return DeadError();
        return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " exited"));
      }
      result.cancelled = true;
      result.term_signal = SIGKILL;
      break;
    }
  }
  result.duration = absl::Now() - start;
  result.stdout_truncated = result.stdout_truncated || out.truncated || (tty && tty->truncated);
  result.stderr_truncated = err.truncated;
  if (have_status) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  }
  // Concurrent commands share the memory cgroup; an OOM kill is attributed to whichever
  // command died of SIGKILL meanwhile.
  result.cpu_time_exceeded = result.term_signal == SIGXCPU;
  if (result.term_signal == SIGSYS && !gvisor()) {
    // The filter kills only for a foreign architecture's call (seccomp_filter.h); the exec
    // result's description says so to the caller.
    log::Warning("sandbox.seccomp_kill", {{"session", spec_.id}, {"command", request.argv[0]}});
  }
  result.oom_killed = result.term_signal == SIGKILL && !result.timed_out && !result.cancelled &&
                      cgroups_.OomKillCount() > oom_before;
  return result;
}

}  // namespace sandgate::sandbox::local
