// The wire protocol between the daemon and sandgate-gvisor-bridge, the PID 1 of a gVisor
// sandbox.
//
// Under gVisor the daemon cannot hand file descriptors to sandgate-init: the only channel
// into the sandbox is a host Unix socket the sandbox connects to (runsc --host-uds=open), and
// gVisor passes no SCM_RIGHTS across it. So the init's protocol (init_protocol.h) is tunnelled
// over that one stream connection, with each descriptor replaced by a numbered channel:
//
//   daemon: session --SEQPACKET+fds--> GvisorTunnel ==stream of frames==> bridge (in sandbox)
//   bridge: --SEQPACKET+fds--> sandgate-init (unchanged, PID 2)
//
// The tunnel on each side turns the fds of a kExec (three, or four with kExecStdinPipe) into a
// channel id and back, so neither the session's Exec nor the init knows a tunnel is there.
// A terminal (kExecPty) cannot cross: its master would have to become a descriptor on the
// host, so the session refuses one under gVisor before anything is sent.
//
// Every frame is a FrameHeader then `length` payload bytes:
//   kControl       a message of the control socket, either way. daemon -> bridge: a kExec
//                  message opening channel `channel` (> 0, never reused by a session).
//   kCommand       a message of channel's command socket, either way.
//   kCommandEof    that command socket was closed, either way.
//   kStdout/Err    bridge -> daemon: bytes the command wrote; length 0 = the pipe's EOF.
//   kStdin         daemon -> bridge: bytes for the command's stdin (kExecStdinPipe);
//                  length 0 = close it. The bridge holds at most kMaxStdinBacklog bytes the
//                  command has not read yet; beyond that it closes the command's stdin.
// A kControl kConnect (an exposed port) opens a channel too, with no command: the bridge
// connects to 127.0.0.1:port on gVisor's own loopback and, once connected, connects to the
// ports socket (kPortsSocket), writes the channel id there (4 bytes, host order) and relays
// the TCP connection over that socket; the daemon hands that socket to the session as the
// init's kConnected would. A connect that fails is a kCommand kFailed{errno} on the channel.
// The connection's EOF ends the sandbox (bridge side) or the session (daemon side).
//
// Plain C++ with no dependencies: the bridge is a small static binary.
#ifndef SANDGATE_SANDBOX_LOCAL_BRIDGE_PROTOCOL_H_
#define SANDGATE_SANDBOX_LOCAL_BRIDGE_PROTOCOL_H_

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "sandbox/local/init_protocol.h"

namespace sandgate::sandbox::bridgeproto {

enum FrameKind : uint32_t {
  kControl = 1,
  kCommand = 2,
  kCommandEof = 3,
  kStdout = 4,
  kStderr = 5,
  kStdin = 6,
};

struct FrameHeader {
  uint32_t channel = 0;
  uint32_t kind = 0;
  uint32_t length = 0;
};

// Largest payload: a whole kExec message.
constexpr uint32_t kMaxPayload = initproto::kMaxExecMessage;
// Stdin bytes a command may leave unread in the bridge before its stdin is closed.
constexpr size_t kMaxStdinBacklog = 8 << 20;
// Where the bridge binary and the socket directory appear inside a gVisor sandbox.
constexpr const char* kBridgePathInSandbox = "/.sandgate/bridge";
constexpr const char* kSocketDirInSandbox = "/.sandgate/sock";
// Socket names in that directory: the control connection (accepted once, then removed), the
// network proxy (restricted/enabled sessions only) and the exposed ports' connections.
constexpr const char* kControlSocket = "control.sock";
constexpr const char* kProxySocket = "proxy.sock";
constexpr const char* kPortsSocket = "ports.sock";

// The whole of `n` bytes of the tunnel's socket, or false (EOF, an error). Both ends use it.
inline bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// All of `buf` to the tunnel's socket, or false; a closed peer is an error, not SIGPIPE.
inline bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace sandgate::sandbox::bridgeproto

#endif  // SANDGATE_SANDBOX_LOCAL_BRIDGE_PROTOCOL_H_
