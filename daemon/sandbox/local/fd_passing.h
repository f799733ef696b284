// Passing file descriptors over a Unix socket (SCM_RIGHTS), for every side of the init's
// protocol (init_protocol.h): the daemon's session, sandgate-init, sandgate-gvisor-bridge and
// the gVisor tunnel. One message carries at most kMaxFds descriptors.
//
//   const int fds[3] = {cmd, out, err};
//   if (fdpass::Send(sock, msg.data(), msg.size(), fds, 3) < 0) ...
//   int got[fdpass::kMaxFds];
//   size_t count = 0;
//   ssize_t n = fdpass::Receive(sock, buf, sizeof(buf), got, &count, MSG_DONTWAIT);
//
// Plain C++ with no dependencies (the init and the bridge are small static binaries).
// Thread safe (no state).
#ifndef SANDGATE_SANDBOX_LOCAL_FD_PASSING_H_
#define SANDGATE_SANDBOX_LOCAL_FD_PASSING_H_

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace sandgate::sandbox::fdpass {

constexpr size_t kMaxFds = 4;

// Sends `size` bytes of `data` and `count` (<= kMaxFds) descriptors as one message, retrying
// on EINTR; a closed peer is an error, not SIGPIPE. As sendmsg.
inline ssize_t Send(int sock, const void* data, size_t size, const int* fds, size_t count) {
  if (count > kMaxFds) {
    errno = EINVAL;
    return -1;
  }
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  memset(cbuf, 0, sizeof(cbuf));
  struct iovec iov = {const_cast<void*>(data), size};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Receives one message into `buf` and the descriptors it carries (close-on-exec) into `fds`,
// setting `*count`; descriptors beyond kMaxFds are closed. A message or descriptor list the
// buffers cut short counts as an error (EMSGSIZE), its descriptors closed. `flags` as for
// recvmsg (MSG_DONTWAIT). As recvmsg.
inline ssize_t Receive(int sock, void* buf, size_t size, int* fds, size_t* count, int flags) {
  *count = 0;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  struct iovec iov = {buf, size};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  ssize_t n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t carried = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < carried; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*count < kMaxFds) {
        fds[(*count)++] = fd;
      } else {
        close(fd);
      }
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    for (size_t i = 0; i < *count; ++i) close(fds[i]);
    *count = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace sandgate::sandbox::fdpass

#endif  // SANDGATE_SANDBOX_LOCAL_FD_PASSING_H_
