#include "sandbox/local/gvisor_tunnel.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/errors.h"
#include "sandbox/local/bridge_protocol.h"
#include "sandbox/local/fd_passing.h"

namespace sandgate::sandbox::local {
namespace {

namespace bp = bridgeproto;

bool SendFrame(int fd, uint32_t channel, uint32_t kind, const void* data, size_t length) {
  bp::FrameHeader h;
  h.channel = channel;
  h.kind = kind;
  h.length = static_cast<uint32_t>(length);
  return bp::WriteFull(fd, &h, sizeof(h)) && bp::WriteFull(fd, data, length);
}

// Writes all of `data` to a pipe; false once the reader is gone (the session stopped
// waiting for the command), after which the channel's output is dropped.
bool WritePipe(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t r = write(fd, data.data() + off, data.size() - off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    off += static_cast<size_t>(r);
  }
  return true;
}

// The session's fds of one command (`in`, the stdin pipe's read end, only with
// kExecStdinPipe); of a kConnect, only `cmd` (its reply socket).
struct Channel {
  UniqueFd cmd, out, err, in;
};

// The channel id the bridge writes first on a ports connection, or 0. The bridge writes it
// as soon as it connected; a second is plenty.
uint32_t ReadChannelId(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  uint32_t id = 0;
  if (poll(&p, 1, 1000) != 1 || !bp::ReadFull(fd, &id, sizeof(id))) return 0;
  return id;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GvisorTunnel>> GvisorTunnel::Start(UniqueFd bridge, UniqueFd ports) {
  std::unique_ptr<GvisorTunnel> t(new GvisorTunnel());
  t->ports_ = std::move(ports);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  t->session_end_.reset(sv[0]);
  t->tunnel_end_.reset(sv[1]);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  t->wake_r_.reset(wake[0]);
  t->wake_w_.reset(wake[1]);
  t->bridge_ = std::move(bridge);
  t->thread_ = std::thread([p = t.get()] { p->Loop(); });
  return t;
}

GvisorTunnel::~GvisorTunnel() {
  wake_w_.reset();  // POLLHUP on wake_r_
  if (thread_.joinable()) thread_.join();
}

UniqueFd GvisorTunnel::TakeSessionEnd() { return std::move(session_end_); }

void GvisorTunnel::Loop() {
  // A command's reader may be gone when its output arrives: EPIPE, not a signal.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  std::map<uint32_t, Channel> channels;
  uint32_t next_channel = 1;
  const int host = bridge_.get(), session = tunnel_end_.get();
  std::vector<struct pollfd> pfds;
  std::vector<uint32_t> ids;
  for (;;) {
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_r_.get(), POLLIN, 0});
    pfds.push_back({host, POLLIN, 0});
    pfds.push_back({session, POLLIN, 0});
    pfds.push_back({ports_.get(), POLLIN, 0});
    for (const auto& [id, ch] : channels) {
      ids.push_back(id);
      pfds.push_back({ch.cmd.valid() ? ch.cmd.get() : -1, POLLIN, 0});
      pfds.push_back({ch.in.valid() ? ch.in.get() : -1, POLLIN, 0});
    }
    if (poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfds[0].revents != 0) break;
    for (size_t i = 0; i < ids.size(); ++i) {
      Channel& ch = channels[ids[i]];
      if (pfds[5 + 2 * i].revents != 0) {
        // What the session writes to the command's stdin; its EOF closes the command's.
        char buf[65536];
        ssize_t n = read(ch.in.get(), buf, sizeof(buf));
        if (n >= 0 || (errno != EAGAIN && errno != EINTR)) {
          if (!SendFrame(host, ids[i], bp::kStdin, buf, n > 0 ? static_cast<size_t>(n) : 0)) {
            goto done;
          }
          if (n <= 0) ch.in.reset();
        }
      }
      if (pfds[4 + 2 * i].revents == 0) continue;
      initproto::MessageHeader m;
      ssize_t n = recv(ch.cmd.get(), &m, sizeof(m), MSG_DONTWAIT);
      if (n > 0) {
        if (!SendFrame(host, ids[i], bp::kCommand, &m, static_cast<size_t>(n))) goto done;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        ch.cmd.reset();
        if (!SendFrame(host, ids[i], bp::kCommandEof, nullptr, 0)) goto done;
        if (!ch.out.valid() && !ch.err.valid()) channels.erase(ids[i]);
      }
    }
    if (pfds[3].revents != 0) {
      // An exposed port's connection, relayed by the bridge: the answer to a kConnect.
      UniqueFd conn(accept4(ports_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      const uint32_t id = conn.valid() ? ReadChannelId(conn.get()) : 0;
      auto it = channels.find(id);
      if (id != 0 && it != channels.end() && it->second.cmd.valid() && !it->second.out.valid()) {
        // The kConnected the init would send, with the bridge's relay as the connection.
        initproto::SendWithFd(it->second.cmd.get(), initproto::kConnected, 0, conn.get());
        channels.erase(it);
      }
    }
    for (auto it = channels.begin(); it != channels.end();) {
      const Channel& ch = it->second;
      const bool over = !ch.cmd.valid() && !ch.out.valid() && !ch.err.valid() && !ch.in.valid();
      it = over ? channels.erase(it) : std::next(it);
    }
    if (pfds[2].revents != 0) {
      // A kExec from the session, with its three fds (four with a stdin pipe), or a kConnect
      // with its reply socket.
      std::string message(initproto::kMaxExecMessage, '\0');
      int fds[fdpass::kMaxFds];
      size_t count = 0;
      ssize_t n =
          fdpass::Receive(session, message.data(), message.size(), fds, &count, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) break;  // the session closed: end the sandbox
      message.resize(static_cast<size_t>(n));
      initproto::MessageHeader h;
      if (message.size() >= sizeof(h)) memcpy(&h, message.data(), sizeof(h));
      const bool connect = message.size() >= sizeof(h) && h.type == initproto::kConnect;
      const bool fits =
          connect ? count == 1
                  : (count == initproto::kExecFdCount || count == initproto::kMaxExecFdCount);
      if (!fits) {
        for (size_t i = 0; i < count; ++i) close(fds[i]);
        break;  // not from BwrapSession::SendControl: a bug, end the sandbox rather than guess
      }
      const uint32_t id = next_channel++;
      Channel& ch = channels[id];
      ch.cmd.reset(fds[0]);
      if (connect && !ports_.valid()) {
        initproto::MessageHeader failed;
        failed.type = initproto::kFailed;
        failed.value = ENOTSUP;
        (void)send(ch.cmd.get(), &failed, sizeof(failed), MSG_NOSIGNAL);
        channels.erase(id);
        continue;
      }
      if (!connect) {
        ch.out.reset(fds[1]);
        ch.err.reset(fds[2]);
        if (count == initproto::kMaxExecFdCount) ch.in.reset(fds[3]);
      }
      if (!SendFrame(host, id, bp::kControl, message.data(), message.size())) break;
    }
    if (pfds[1].revents != 0) {
      bp::FrameHeader h;
      if (!bp::ReadFull(host, &h, sizeof(h)) || h.length > bp::kMaxPayload) break;
      std::string payload(h.length, '\0');
      if (!bp::ReadFull(host, payload.data(), payload.size())) break;
      if (h.kind == bp::kControl && h.channel == 0) {
        (void)send(session, payload.data(), payload.size(), MSG_NOSIGNAL);
        continue;
      }
      auto it = channels.find(h.channel);
      if (it == channels.end()) continue;  // the session already let go of it
      Channel& ch = it->second;
      switch (h.kind) {
        case bp::kCommand:
          if (ch.cmd.valid())
            (void)send(ch.cmd.get(), payload.data(), payload.size(), MSG_NOSIGNAL);
          break;
        case bp::kCommandEof:
          ch.cmd.reset();
          break;
        case bp::kStdout:
        case bp::kStderr: {
          UniqueFd& pipe = h.kind == bp::kStdout ? ch.out : ch.err;
          if (payload.empty() || (pipe.valid() && !WritePipe(pipe.get(), payload))) pipe.reset();
          break;
        }
        default:
          goto done;
      }
      if (!ch.cmd.valid() && !ch.out.valid() && !ch.err.valid() && !ch.in.valid()) {
        channels.erase(it);
      }
    }
  }
done:
  // The bridge sees EOF and ends the sandbox; the session sees EOF on every socket it holds.
  shutdown(host, SHUT_RDWR);
  shutdown(session, SHUT_RDWR);
}

}  // namespace sandgate::sandbox::local
