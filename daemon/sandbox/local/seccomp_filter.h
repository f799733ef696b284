// The seccomp filter every local sandbox runs under (isolation.md §6), compiled with
// libseccomp to classic BPF for bubblewrap's --seccomp FD.
//
// Default allow; denies what lets code leave or attack the sandbox (mount, namespaces,
// keyrings, bpf, perf, userfaultfd, io_uring, module and clock calls, TIOCSTI, and every
// file-watching API: inotify, fanotify, dnotify), returns
// EAFNOSUPPORT for socket families other than unix, inet, inet6 and netlink, and kills the
// process on a foreign architecture's syscall.
//
// Thread safe (pure function).
#ifndef SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_
#define SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandgate::sandbox::local {

// The BPF program as bytes (struct sock_filter array), ready to be written to bwrap.
absl::StatusOr<std::string> BuildSeccompFilter();

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_
