// sandgate-init: PID 1 of a local sandbox.
//
// Usage: sandgate-init <control-fd> [<command-uid>]
//
// Started by bubblewrap (--as-pid-1) with every restriction already applied (namespaces,
// no capabilities, seccomp, unprivileged uid). It spawns the commands the daemon asks for
// over the control socket (protocol in init_protocol.h), reports their pids and exit
// statuses, kills them on request, and reaps every process in the PID namespace, orphans
// included. It exits when the control socket reaches EOF, which tears down the namespace.
//
// With a command uid (gVisor sandboxes: the init runs as root inside gVisor, so that the
// commands, running as that uid, cannot signal it), every command drops to that uid and gid,
// with no supplementary groups and so no capabilities, before it execs.
//
// Single threaded; one poll loop. It trusts the daemon and nothing else: nothing inside the
// sandbox can talk to it (the sockets are not reachable by path) or ptrace it (not dumpable).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "sandbox/local/fd_passing.h"
#include "sandbox/local/init_protocol.h"

namespace {

using sandgate::sandbox::initproto::kConnect;
using sandgate::sandbox::initproto::kConnected;
using sandgate::sandbox::initproto::kExec;
using sandgate::sandbox::initproto::kExecFdCount;
using sandgate::sandbox::initproto::kExecPty;
using sandgate::sandbox::initproto::kExecStdinPipe;
using sandgate::sandbox::initproto::kExited;
using sandgate::sandbox::initproto::kFailed;
using sandgate::sandbox::initproto::kKill;
using sandgate::sandbox::initproto::kKillAll;
using sandgate::sandbox::initproto::kMaxExecMessage;
using sandgate::sandbox::initproto::kReady;
using sandgate::sandbox::initproto::kSignal;
using sandgate::sandbox::initproto::kStarted;
namespace fdpass = sandgate::sandbox::fdpass;
using sandgate::sandbox::initproto::MessageHeader;
using sandgate::sandbox::initproto::SendWithFd;

uid_t g_command_uid = 0;  // 0 = run commands with the init's own ids

struct Command {
  pid_t pid = -1;  // also the process group id (the child calls setsid)
  int sock = -1;   // -1 once the daemon closed its end
  bool exited = false;
};

void Send(int sock, uint32_t type, int32_t value) {
  MessageHeader m;
  m.type = type;
  m.value = value;
  // A failure means the daemon stopped listening on this command; nothing to do.
  (void)send(sock, &m, sizeof(m), MSG_NOSIGNAL);
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Finds argv0 on the command's own PATH, as a shell would (the init's environment is empty,
// so execvpe's view of PATH would be wrong).
std::string Resolve(const std::string& argv0, const std::vector<char*>& env) {
  if (argv0.find('/') != std::string::npos) return argv0;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (char* e : env) {
    if (e != nullptr && strncmp(e, "PATH=", 5) == 0) path = e + 5;
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + argv0;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return argv0;
}

// What a command's stdin, stdout and stderr are: `in` (-1: /dev/null), `out` and `err`; or,
// when `tty` is not empty, the terminal of that path for all three.
struct ChildStdio {
  int in = -1;
  int out = -1;
  int err = -1;
  std::string tty;
};

// Runs in the forked child; never returns.
[[noreturn]] void ExecChild(const std::string& cwd, std::vector<char*>& argv,
                            std::vector<char*>& env, const ChildStdio& stdio,
                            uint32_t cpu_seconds) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  setsid();
  int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (adj >= 0) {
    (void)write(adj, "0", 1);
    close(adj);
  }
  struct rlimit core = {0, 0};
  setrlimit(RLIMIT_CORE, &core);
  if (cpu_seconds > 0) {
    // Hard one second above soft: SIGXCPU first, SIGKILL if that is ignored.
    struct rlimit cpu = {cpu_seconds, static_cast<rlim_t>(cpu_seconds) + 1};
    setrlimit(RLIMIT_CPU, &cpu);
  }
  if (!stdio.tty.empty()) {
    // A session leader without a terminal: opening one makes it the controlling terminal.
    int tty = open(stdio.tty.c_str(), O_RDWR);
    if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) != 0) _exit(127);
    for (int fd : {0, 1, 2}) {
      if (dup2(tty, fd) < 0) _exit(127);
    }
  } else {
    int in = stdio.in >= 0 ? stdio.in : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || dup2(in, 0) < 0 || dup2(stdio.out, 1) < 0 || dup2(stdio.err, 2) < 0) {
      _exit(127);
    }
  }
  syscall(SYS_close_range, 3, ~0U, 0);
  if (g_command_uid != 0) {
    // An empty bounding set and no new privileges: nothing the command execs (a setuid
    // binary, file capabilities) can regain what the init holds.
    for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  }
  if (g_command_uid != 0 &&
      (setgroups(0, nullptr) != 0 || setresgid(g_command_uid, g_command_uid, g_command_uid) != 0 ||
       setresuid(g_command_uid, g_command_uid, g_command_uid) != 0)) {
    WriteAll(2, std::string("sandgate: cannot drop to the sandbox uid: ") + strerror(errno) + "\n");
    _exit(126);
  }
  if (chdir(cwd.c_str()) != 0) {
    WriteAll(2, "sandgate: cannot enter " + cwd + ": " + strerror(errno) + "\n");
    _exit(126);
  }
  std::string file = Resolve(argv[0], env);
  execve(file.c_str(), argv.data(), env.data());
  int err = errno;
  WriteAll(2, std::string("sandgate: ") + argv[0] + ": " + strerror(err) + "\n");
  _exit(err == ENOENT ? 127 : 126);
}

void CloseFds(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

// A new pseudo-terminal of rows x cols: its master fd (close-on-exec) and the slave's path,
// or -1 with errno set.
int OpenTerminal(uint16_t rows, uint16_t cols, std::string* slave) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return -1;
  char name[128];
  struct winsize ws = {};
  ws.ws_row = rows;
  ws.ws_col = cols;
  if (grantpt(master) != 0 || unlockpt(master) != 0 || ptsname_r(master, name, sizeof(name)) != 0 ||
      ioctl(master, TIOCSWINSZ, &ws) != 0) {
    int err = errno;
    close(master);
    errno = err;
    return -1;
  }
  *slave = name;
  return master;
}

// Handles one kExec message; takes ownership of `fds`.
void StartCommand(const char* buf, size_t len, const std::vector<int>& fds,
                  std::vector<Command>& commands) {
  MessageHeader h;
  if (len >= sizeof(h)) memcpy(&h, buf, sizeof(h));
  const size_t want_fds = kExecFdCount + ((h.flags & kExecStdinPipe) != 0 ? 1 : 0);
  if (len < sizeof(h) || fds.size() != want_fds) {
    CloseFds(fds);
    return;
  }
  std::vector<std::string> strings;
  size_t off = sizeof(h);
  while (off < len) {
    const char* s = buf + off;
    size_t n = strnlen(s, len - off);
    if (off + n >= len) break;  // unterminated tail: malformed
    strings.emplace_back(s, n);
    off += n + 1;
  }
  if (h.argc == 0 || strings.size() != 1 + static_cast<size_t>(h.argc) + h.envc) {
    Send(fds[0], kFailed, EINVAL);
    CloseFds(fds);
    return;
  }
  std::vector<char*> argv, env;
  for (uint32_t i = 0; i < h.argc; ++i) argv.push_back(strings[1 + i].data());
  for (uint32_t i = 0; i < h.envc; ++i) env.push_back(strings[1 + h.argc + i].data());
  argv.push_back(nullptr);
  env.push_back(nullptr);

  ChildStdio stdio;
  stdio.out = fds[1];
  stdio.err = fds[2];
  if (fds.size() > static_cast<size_t>(kExecFdCount)) stdio.in = fds[3];
  int master = -1;
  if ((h.flags & kExecPty) != 0) {
    master = OpenTerminal(h.rows, h.cols, &stdio.tty);
    if (master < 0) {
      Send(fds[0], kFailed, errno);
      CloseFds(fds);
      return;
    }
  }
  pid_t pid = fork();
  if (pid == 0) ExecChild(strings[0], argv, env, stdio, h.cpu_seconds);
  const int err = errno;
  for (size_t i = 1; i < fds.size(); ++i) close(fds[i]);
  if (pid < 0) {
    if (master >= 0) close(master);
    Send(fds[0], kFailed, err);
    close(fds[0]);
    return;
  }
  if (master >= 0) {
    SendWithFd(fds[0], kStarted, pid, master);
    close(master);
  } else {
    Send(fds[0], kStarted, pid);
  }
  commands.push_back(Command{pid, fds[0], false});
}

// Handles one kConnect: a TCP connection to 127.0.0.1:port of this sandbox's own network
// namespace, handed to the daemon on the reply socket; takes ownership of `fds`. The connect
// is non-blocking (a full accept queue must not stall the init); the daemon waits for it.
void ConnectPort(const MessageHeader& h, const std::vector<int>& fds) {
  if (fds.size() != 1 || h.value < 1 || h.value > 65535) {
    if (fds.size() == 1) Send(fds[0], kFailed, EINVAL);
    CloseFds(fds);
    return;
  }
  int sock = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    Send(fds[0], kFailed, errno);
    CloseFds(fds);
    return;
  }
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(h.value));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(sock, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0 &&
      errno != EINPROGRESS) {
    Send(fds[0], kFailed, errno);
  } else {
    SendWithFd(fds[0], kConnected, 0, sock);
  }
  close(sock);
  CloseFds(fds);
}

// Reads one message from the control socket. Returns false on EOF or a fatal error.
bool HandleControl(int ctl, std::vector<Command>& commands) {
  static char buf[kMaxExecMessage];
  int received[fdpass::kMaxFds];
  size_t count = 0;
  ssize_t n = fdpass::Receive(ctl, buf, sizeof(buf), received, &count, 0);
  // A message cut short (EMSGSIZE) is dropped with its fds, as one of an unknown type.
  if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EMSGSIZE;
  if (n == 0) return false;
  std::vector<int> fds(received, received + count);
  MessageHeader h;
  if (static_cast<size_t>(n) >= sizeof(h)) {
    memcpy(&h, buf, sizeof(h));
    if (h.type == kExec) {
      StartCommand(buf, static_cast<size_t>(n), fds, commands);
      return true;
    }
    if (h.type == kConnect) {
      ConnectPort(h, fds);
      return true;
    }
  }
  CloseFds(fds);
  return true;
}

void KillCommand(const Command& c) {
  kill(-c.pid, SIGKILL);
  if (!c.exited) kill(c.pid, SIGKILL);
}

// The process group of the process `pid` (from /proc/<pid>/stat), or -1.
pid_t ProcessGroupOf(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')', so parse after the last.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return -1;
  char state;
  int ppid, pgrp;
  if (sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return -1;
  return pgrp;
}

// Kills `c` and every process that belongs to no other running command: what `c` left in
// the background, wherever it moved (setsid). A few rounds, for processes forked meanwhile.
void KillCommandAndStragglers(const Command& c, const std::vector<Command>& commands) {
  KillCommand(c);
  for (int round = 0; round < 3; ++round) {
    DIR* d = opendir("/proc");
    if (d == nullptr) return;
    int killed = 0;
    while (struct dirent* e = readdir(d)) {
      pid_t pid = atoi(e->d_name);
      if (pid <= 1 || pid == getpid()) continue;  // under gVisor the init is PID 2
      pid_t pgrp = ProcessGroupOf(pid);
      if (pgrp < 0) continue;
      bool other = false;
      for (const Command& o : commands) {
        if (&o != &c && !o.exited && o.pid == pgrp) other = true;
      }
      if (!other && kill(pid, SIGKILL) == 0) ++killed;
    }
    closedir(d);
    if (killed == 0) return;
  }
}

// The signals a caller may send to a command (kSignal).
bool Sendable(int signal) {
  switch (signal) {
    case SIGHUP:
    case SIGINT:
    case SIGQUIT:
    case SIGTERM:
    case SIGKILL:
    case SIGUSR1:
    case SIGUSR2:
      return true;
    default:
      return false;
  }
}

void HandleCommandSocket(Command& c, const std::vector<Command>& commands) {
  MessageHeader h;
  ssize_t n = recv(c.sock, &h, sizeof(h), MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n == static_cast<ssize_t>(sizeof(h)) && h.type == kSignal) {
    if (Sendable(h.value) && !c.exited) kill(-c.pid, h.value);
    return;
  }
  if (n == static_cast<ssize_t>(sizeof(h)) && h.type == kKill) {
    KillCommand(c);
    return;
  }
  if (n == static_cast<ssize_t>(sizeof(h)) && h.type == kKillAll) {
    KillCommandAndStragglers(c, commands);
    return;
  }
  // EOF or garbage: the daemon gave up on this command; nothing of it may linger.
  KillCommand(c);
  close(c.sock);
  c.sock = -1;
}

void ReapAll(std::vector<Command>& commands) {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Command& c : commands) {
      if (c.pid != pid || c.exited) continue;
      c.exited = true;
      if (c.sock >= 0) Send(c.sock, kExited, status);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: sandgate-init <control-fd> [<command-uid>]\n");
    return 2;
  }
  if (argc == 3) g_command_uid = static_cast<uid_t>(strtoul(argv[2], nullptr, 10));
  const int ctl = atoi(argv[1]);
  if (fcntl(ctl, F_SETFD, FD_CLOEXEC) != 0) {
    perror("sandgate-init: control fd");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    perror("sandgate-init: signalfd");
    return 2;
  }
  // Nothing the init does after this point may write to the terminal-less stdio it got.
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    close(devnull);
  }
  Send(ctl, kReady, getpid());

  std::vector<Command> commands;
  std::vector<struct pollfd> pfds;
  for (;;) {
    pfds.clear();
    pfds.push_back({sfd, POLLIN, 0});
    pfds.push_back({ctl, POLLIN, 0});
    for (const Command& c : commands) pfds.push_back({c.sock, POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfds[0].revents != 0) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof(si)) > 0) {
      }
      ReapAll(commands);
    }
    // Indices in pfds match `commands` as it was before this round; handle those first.
    for (size_t i = 2; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) HandleCommandSocket(commands[i - 2], commands);
    }
    if (pfds[1].revents != 0 && !HandleControl(ctl, commands)) break;
    std::vector<Command> live;
    for (Command& c : commands) {
      if (c.sock >= 0 || !c.exited) live.push_back(c);
    }
    commands.swap(live);
  }
  // The daemon is gone: end every process in the namespace. Exiting does that too, but
  // killing first makes the teardown not depend on the order the kernel chooses.
  kill(-1, SIGKILL);
  return 0;
}
