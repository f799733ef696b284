// sandgate-gvisor-bridge: PID 1 of a gVisor sandbox.
//
// Usage: sandgate-gvisor-bridge <command-uid> [<proxy-port>]
//
// Runs as root inside gVisor (gVisor's root: the host never sees it), with only CAP_SETUID,
// CAP_SETGID, CAP_KILL and CAP_SETPCAP, so that commands, which sandgate-init drops to
// <command-uid>, cannot signal it or the init (gVisor does not shield a PID 1 from SIGKILL sent
// from inside). Connects to the daemon's control socket in /.sandgate/sock, starts sandgate-init
// (PID 2) on a socketpair, and tunnels the init's protocol over that one connection
// (bridge_protocol.h): each kExec from the daemon gets a fresh command socket and stdout and stderr
// pipes made here, and what flows on them goes back as frames of that channel. With a port, it also
// listens on 127.0.0.1:<port> of gVisor's own loopback and relays each connection to the daemon's
// proxy socket, so the network proxy sees exactly what it sees from a namespaces sandbox.
//
// An exposed port's kConnect (bridge_protocol.h) connects to 127.0.0.1:<port> of gVisor's
// loopback and relays that connection to the daemon's ports socket, the same way.
//
// It exits when the daemon's connection ends or the init exits; either way the sandbox
// ends with it. Single threaded; one poll loop; not dumpable. Everything it starts runs as
// its own uid, inside gVisor.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sandbox/local/bridge_protocol.h"
#include "sandbox/local/fd_passing.h"

namespace {

namespace bp = sandgate::sandbox::bridgeproto;
namespace ip = sandgate::sandbox::initproto;

int g_host = -1;  // the daemon's connection

// A frame to the daemon; a failed write means the daemon is gone.
void SendFrame(uint32_t channel, uint32_t kind, const void* data, size_t length) {
  bp::FrameHeader h;
  h.channel = channel;
  h.kind = kind;
  h.length = static_cast<uint32_t>(length);
  if (!bp::WriteFull(g_host, &h, sizeof(h)) || !bp::WriteFull(g_host, data, length)) {
    kill(-1, SIGKILL);
    _exit(0);
  }
}

int ConnectUnix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One command: its socket and pipes, made here for the init. `in` is the write end of the
// command's stdin (kExecStdinPipe), fed from `in_buf`; `in_eof` once the daemon closed it.
struct Channel {
  int cmd = -1;
  int out = -1;
  int err = -1;
  int in = -1;
  std::string in_buf;
  bool in_eof = false;
};

// One proxied TCP connection: bytes copied both ways through small buffers.
struct Relay {
  int a = -1;  // the sandbox's TCP connection
  int b = -1;  // the daemon's proxy socket
  std::string a_to_b, b_to_a;
  bool a_eof = false, b_eof = false;
};

// An exposed port's connection to 127.0.0.1:<port> that is still being made.
struct PendingConnect {
  uint32_t channel = 0;
  int fd = -1;
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Opens channel `id` for a kExec message: makes the fds and sends them to the init.
bool OpenChannel(int init_ctl, uint32_t id, const std::string& message,
                 std::map<uint32_t, Channel>& channels) {
  ip::MessageHeader h;
  if (message.size() < sizeof(h)) return false;
  memcpy(&h, message.data(), sizeof(h));
  const bool with_stdin = (h.flags & ip::kExecStdinPipe) != 0;
  int sv[2], po[2], pe[2], pi[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) return false;
  if (with_stdin && pipe2(pi, O_CLOEXEC) != 0) return false;
  const int fds[ip::kMaxExecFdCount] = {sv[1], po[1], pe[1], pi[0]};
  ssize_t n = sandgate::sandbox::fdpass::Send(init_ctl, message.data(), message.size(), fds,
                                              with_stdin ? ip::kMaxExecFdCount : ip::kExecFdCount);
  close(sv[1]);
  close(po[1]);
  close(pe[1]);
  if (pi[0] >= 0) close(pi[0]);
  Channel ch;
  ch.cmd = sv[0];
  ch.out = po[0];
  ch.err = pe[0];
  ch.in = pi[1];
  if (ch.in >= 0) fcntl(ch.in, F_SETFL, O_NONBLOCK);  // a command that does not read
  if (n < 0) {
    CloseFd(ch.cmd);
    CloseFd(ch.out);
    CloseFd(ch.err);
    CloseFd(ch.in);
    return false;
  }
  channels[id] = ch;
  return true;
}

void SendFailed(uint32_t channel, int err) {
  ip::MessageHeader m;
  m.type = ip::kFailed;
  m.value = err;
  SendFrame(channel, bp::kCommand, &m, sizeof(m));
}

// Starts the connection of a kConnect on `channel`: pending until connected.
void StartConnect(uint32_t channel, const std::string& payload,
                  std::vector<PendingConnect>& pending) {
  ip::MessageHeader h;
  memcpy(&h, payload.data(), sizeof(h));
  if (h.value < 1 || h.value > 65535) return SendFailed(channel, EINVAL);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return SendFailed(channel, errno);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(h.value));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(fd);
    return SendFailed(channel, err);
  }
  pending.push_back({channel, fd});
}

// A pending connection is made (or failed): relayed to the daemon's ports socket, its first
// bytes the channel id; or kFailed on the channel.
void FinishConnect(PendingConnect& c, const std::string& dir, std::vector<Relay>& relays) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  int b = err == 0 ? ConnectUnix(dir + "/" + bp::kPortsSocket) : -1;
  if (err == 0 && b < 0) err = errno;
  if (b >= 0 && !bp::WriteFull(b, &c.channel, sizeof(c.channel))) {
    err = EPIPE;
    CloseFd(b);
  }
  if (err != 0) {
    SendFailed(c.channel, err);
    CloseFd(c.fd);
    return;
  }
  fcntl(b, F_SETFL, O_NONBLOCK);
  Relay r;
  r.a = c.fd;
  r.b = b;
  relays.push_back(r);
  c.fd = -1;
}

// Writes what the command's stdin can take now; closes it once drained after the daemon's EOF.
void FeedStdin(Channel& ch) {
  while (ch.in >= 0 && !ch.in_buf.empty()) {
    ssize_t n = write(ch.in, ch.in_buf.data(), ch.in_buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      CloseFd(ch.in);  // the command closed its stdin
      ch.in_buf.clear();
      return;
    }
    ch.in_buf.erase(0, static_cast<size_t>(n));
  }
  if (ch.in_eof && ch.in_buf.empty()) CloseFd(ch.in);
}

// Handles one frame from the daemon; false when the connection ended.
bool HandleHostFrame(int init_ctl, std::map<uint32_t, Channel>& channels,
                     std::vector<PendingConnect>& pending) {
  bp::FrameHeader h;
  if (!bp::ReadFull(g_host, &h, sizeof(h)) || h.length > bp::kMaxPayload) return false;
  std::string payload(h.length, '\0');
  if (!bp::ReadFull(g_host, payload.data(), payload.size())) return false;
  auto it = channels.find(h.channel);
  switch (h.kind) {
    case bp::kControl:
      if (h.channel == 0 || it != channels.end()) return false;  // a broken daemon: stop
      if (payload.size() == sizeof(ip::MessageHeader) &&
          reinterpret_cast<const ip::MessageHeader*>(payload.data())->type == ip::kConnect) {
        StartConnect(h.channel, payload, pending);
        return true;
      }
      if (!OpenChannel(init_ctl, h.channel, payload, channels)) {
        SendFrame(h.channel, bp::kCommandEof, nullptr, 0);
      }
      return true;
    case bp::kCommand:
      if (it != channels.end() && it->second.cmd >= 0) {
        (void)send(it->second.cmd, payload.data(), payload.size(), MSG_NOSIGNAL);
      }
      return true;
    case bp::kCommandEof:
      if (it != channels.end()) CloseFd(it->second.cmd);
      return true;
    case bp::kStdin:
      if (it != channels.end() && it->second.in >= 0) {
        Channel& ch = it->second;
        if (payload.empty()) {
          ch.in_eof = true;
        } else if (ch.in_buf.size() + payload.size() > bp::kMaxStdinBacklog) {
          CloseFd(ch.in);  // the command does not read: it gets EOF, not unbounded memory
          ch.in_buf.clear();
        } else {
          ch.in_buf += payload;
        }
        FeedStdin(ch);
      }
      return true;
    default:
      return false;
  }
}

int ListenTcp(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 128) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Moves what is readable on `from` into `buf` and what `buf` holds into `to`.
void Pump(int from, int to, std::string& buf, bool& eof, short from_ev, short to_ev) {
  if ((from_ev & (POLLIN | POLLHUP | POLLERR)) && buf.size() < 65536) {
    char tmp[16384];
    ssize_t n = read(from, tmp, sizeof(tmp));
    if (n > 0) buf.append(tmp, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) eof = true;
  }
  if ((to_ev & POLLOUT) && !buf.empty()) {
    ssize_t n = write(to, buf.data(), buf.size());
    if (n > 0) buf.erase(0, static_cast<size_t>(n));
    if (n < 0 && errno != EAGAIN && errno != EINTR) eof = true;
  }
  if (eof && buf.empty()) shutdown(to, SHUT_WR);
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  const std::string dir = bp::kSocketDirInSandbox;
  g_host = ConnectUnix(dir + "/" + bp::kControlSocket);
  if (g_host < 0) {
    perror("sandgate-gvisor-bridge: connect to the daemon");
    return 2;
  }
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: sandgate-gvisor-bridge <command-uid> [<proxy-port>]\n");
    return 2;
  }
  int proxy_listener = -1;
  if (argc == 3) {
    proxy_listener = ListenTcp(static_cast<uint16_t>(atoi(argv[2])));
    if (proxy_listener < 0) {
      perror("sandgate-gvisor-bridge: listen for the proxy");
      return 2;
    }
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  int sv[2];
  if (sfd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    perror("sandgate-gvisor-bridge: setup");
    return 2;
  }
  const pid_t init = fork();
  if (init < 0) return 2;
  if (init == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int keep = dup(sv[1]);  // without close-on-exec
    char fd_arg[16];
    snprintf(fd_arg, sizeof(fd_arg), "%d", keep);
    char* const args[] = {const_cast<char*>(ip::kInitPathInSandbox), fd_arg, argv[1], nullptr};
    char* const env[] = {nullptr};
    execve(ip::kInitPathInSandbox, args, env);
    _exit(127);
  }
  close(sv[1]);
  const int init_ctl = sv[0];

  std::map<uint32_t, Channel> channels;
  std::vector<Relay> relays;
  std::vector<PendingConnect> pending;
  std::vector<struct pollfd> pfds;
  char buf[65536];
  for (;;) {
    pfds.clear();
    pfds.push_back({sfd, POLLIN, 0});
    pfds.push_back({g_host, POLLIN, 0});
    pfds.push_back({init_ctl, POLLIN, 0});
    pfds.push_back({proxy_listener, POLLIN, 0});
    std::vector<uint32_t> ids;
    for (const auto& [id, ch] : channels) {
      ids.push_back(id);
      pfds.push_back({ch.cmd, POLLIN, 0});
      pfds.push_back({ch.out, POLLIN, 0});
      pfds.push_back({ch.err, POLLIN, 0});
      pfds.push_back({ch.in_buf.empty() ? -1 : ch.in, POLLOUT, 0});
    }
    const size_t relay_base = pfds.size();
    for (const Relay& r : relays) {
      pfds.push_back(
          {r.a, static_cast<short>((r.a_eof ? 0 : POLLIN) | (r.b_to_a.empty() ? 0 : POLLOUT)), 0});
      pfds.push_back(
          {r.b, static_cast<short>((r.b_eof ? 0 : POLLIN) | (r.a_to_b.empty() ? 0 : POLLOUT)), 0});
    }
    const size_t pending_base = pfds.size();
    for (const PendingConnect& c : pending) pfds.push_back({c.fd, POLLOUT, 0});
    if (poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfds[0].revents != 0) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof(si)) > 0) {
      }
      bool init_gone = false;
      int status;
      pid_t pid;
      // Orphans of the sandbox reparent to this PID 1; the init reaps only its commands.
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) init_gone |= pid == init;
      if (init_gone) break;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      Channel& ch = channels[ids[i]];
      const struct pollfd* p = &pfds[4 + 4 * i];
      if (p[3].revents != 0) FeedStdin(ch);
      if (p[0].revents != 0 && ch.cmd >= 0) {
        ip::MessageHeader m;
        ssize_t n = recv(ch.cmd, &m, sizeof(m), MSG_DONTWAIT);
        if (n > 0) {
          SendFrame(ids[i], bp::kCommand, &m, static_cast<size_t>(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          CloseFd(ch.cmd);
          SendFrame(ids[i], bp::kCommandEof, nullptr, 0);
        }
      }
      for (int k = 1; k <= 2; ++k) {
        int& fd = k == 1 ? ch.out : ch.err;
        if (p[k].revents == 0 || fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        const uint32_t kind = k == 1 ? bp::kStdout : bp::kStderr;
        SendFrame(ids[i], kind, buf, n > 0 ? static_cast<size_t>(n) : 0);
        if (n <= 0) CloseFd(fd);
      }
    }
    for (size_t i = 0; i < relays.size(); ++i) {
      Relay& r = relays[i];
      const short ea = pfds[relay_base + 2 * i].revents, eb = pfds[relay_base + 2 * i + 1].revents;
      Pump(r.a, r.b, r.a_to_b, r.a_eof, ea, eb);
      Pump(r.b, r.a, r.b_to_a, r.b_eof, eb, ea);
    }
    if (pfds[2].revents != 0) {
      // The init's control messages (kReady) go to the daemon as they are.
      ip::MessageHeader m;
      ssize_t n = recv(init_ctl, &m, sizeof(m), MSG_DONTWAIT);
      if (n > 0) SendFrame(0, bp::kControl, &m, static_cast<size_t>(n));
      if (n == 0) break;
    }
    // Before the host's frames, which may add to `pending` (the indices above are its own).
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pfds[pending_base + i].revents != 0) FinishConnect(pending[i], dir, relays);
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const PendingConnect& c) { return c.fd < 0; }),
                  pending.end());
    if (pfds[1].revents != 0 && !HandleHostFrame(init_ctl, channels, pending)) break;
    if (pfds[3].revents != 0) {
      int a = accept4(proxy_listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (a >= 0) {
        int b = ConnectUnix(dir + "/" + bp::kProxySocket);
        if (b < 0) {
          close(a);
        } else {
          fcntl(b, F_SETFL, O_NONBLOCK);
          Relay r;
          r.a = a;
          r.b = b;
          relays.push_back(r);
        }
      }
    }
    // Drop what is finished: channels with every fd closed, relays drained both ways.
    for (auto it = channels.begin(); it != channels.end();) {
      const Channel& ch = it->second;
      it = ch.cmd < 0 && ch.out < 0 && ch.err < 0 && ch.in < 0 ? channels.erase(it) : std::next(it);
    }
    std::vector<Relay> live;
    for (Relay& r : relays) {
      if (r.a_eof && r.b_eof && r.a_to_b.empty() && r.b_to_a.empty()) {
        CloseFd(r.a);
        CloseFd(r.b);
      } else {
        live.push_back(r);
      }
    }
    relays.swap(live);
  }
  // The daemon or the init is gone: end the sandbox.
  kill(-1, SIGKILL);
  return 0;
}
