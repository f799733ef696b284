// The wire protocol between the daemon and sandgate-init, the PID 1 of every local sandbox.
//
// Shared by both sides; plain C++ with no dependencies so the init stays tiny. All messages
// travel over SOCK_SEQPACKET sockets, so one send is one message and message boundaries hold.
//
// Control socket (its fd number is argv[1] of the init):
//   init -> daemon   kReady once, after the sandbox is fully set up (the daemon may then open
//                    /proc/<init>/root/work; no untrusted code has run yet).
//   daemon -> init   kExec: a MessageHeader, then `payload` bytes holding cwd, argv[argc] and
//                    env[envc] as NUL-terminated strings, in that order. SCM_RIGHTS carries
//                    the command socket, the stdout and the stderr write ends, and with
//                    kExecStdinPipe a fourth: the stdin read end (otherwise stdin is
//                    /dev/null). With kExecPty the command runs on a new pseudo-terminal of
//                    the sandbox's own devpts (rows x cols; stdin, stdout and stderr are its
//                    slave, the controlling terminal of the command's session) and the pipes
//                    are closed unused.
//   daemon -> init   kConnect{value = port}: SCM_RIGHTS carries one reply socket. The init
//                    opens a TCP connection to 127.0.0.1:port of the sandbox's own network
//                    namespace (non-blocking; it may still be completing) and answers on the
//                    reply socket kConnected with that socket (SCM_RIGHTS), or kFailed{errno}
//                    when the connect failed at once. An exposed port's connection (docs/
//                    sessions.md "Exposed ports"): never the host's network.
//   EOF              the daemon is gone or closed the session: the init exits, which makes
//                    the kernel kill everything in the PID namespace.
// Command socket (one per command, passed with kExec):
//   init -> daemon   kStarted{value = pid inside the sandbox}, later kExited{value = wait
//                    status}; or kFailed{value = errno} if the command could not be forked
//                    (or its terminal not made). With kExecPty, kStarted carries the
//                    terminal's master fd (SCM_RIGHTS): the daemon reads and writes the
//                    terminal's raw bytes and sets its size there.
//   daemon -> init   kKill: SIGKILL the command's process group.
//   daemon -> init   kSignal{value = signal}: send it to the command's process group; only
//                    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGUSR1, SIGUSR2 (others
//                    are ignored).
//   daemon -> init   kKillAll (wall-clock timeout): SIGKILL the command's process group and
//                    every other process of the sandbox except the init and the process
//                    groups of the other running commands, so that background workers the
//                    command left (also `setsid`/`nohup` ones) die with it.
//   EOF              the daemon no longer waits: the init kills the command's process group.
#ifndef SANDGATE_SANDBOX_LOCAL_INIT_PROTOCOL_H_
#define SANDGATE_SANDBOX_LOCAL_INIT_PROTOCOL_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sandbox/local/fd_passing.h"

namespace sandgate::sandbox::initproto {

enum MessageType : uint32_t {
  kReady = 1,
  kExec = 2,
  kStarted = 3,
  kExited = 4,
  kFailed = 5,
  kKill = 6,
  kKillAll = 7,
  kSignal = 8,
  kConnect = 9,
  kConnected = 10,
};

// MessageHeader::flags of kExec.
enum ExecFlags : uint32_t {
  kExecStdinPipe = 1,  // a fourth fd: the command's stdin
  kExecPty = 2,        // run on a new pseudo-terminal (rows, cols)
};

struct MessageHeader {
  uint32_t type = 0;
  int32_t value = 0;         // pid, wait status or errno, by type
  uint32_t argc = 0;         // kExec only
  uint32_t envc = 0;         // kExec only
  uint32_t cpu_seconds = 0;  // kExec only: RLIMIT_CPU of the command (soft; hard = +1); 0 = none
  uint32_t flags = 0;        // kExec only: ExecFlags
  uint16_t rows = 0;         // kExec with kExecPty: the terminal's size
  uint16_t cols = 0;
};

// Largest kExec message (header + strings). Bounded by the socket send buffer.
constexpr size_t kMaxExecMessage = 128 * 1024;
// File descriptors carried by one kExec message, in this order (a fourth, stdin, with
// kExecStdinPipe).
constexpr int kExecFdCount = 3;
constexpr int kMaxExecFdCount = 4;
// Where the init binary is mounted inside the sandbox.
constexpr const char* kInitPathInSandbox = "/.sandgate/init";

// One header-only message of `type` and `value` on `sock` with `fd` attached (SCM_RIGHTS):
// a terminal's kStarted, a port's kConnected. A failure means the reader is gone; nothing to do.
inline void SendWithFd(int sock, uint32_t type, int32_t value, int fd) {
  MessageHeader m;
  m.type = type;
  m.value = value;
  (void)fdpass::Send(sock, &m, sizeof(m), &fd, 1);
}

}  // namespace sandgate::sandbox::initproto

#endif  // SANDGATE_SANDBOX_LOCAL_INIT_PROTOCOL_H_
