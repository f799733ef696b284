// The seccomp filter every `namespaces` sandbox runs under (isolation.md §6), compiled with
// libseccomp to classic BPF for bubblewrap's --seccomp FD.
//
// An allowlist, anchored on Docker's default profile: the calls ordinary programs make
// (Python, Node, git, compilers, coreutils, the playbooks) are allowed; the calls that let code
// leave or attack the sandbox (mount, namespaces, keyrings, bpf, perf, userfaultfd, module and
// clock calls, cross-process fd and memory access) get EPERM; every other call, including any a
// newer kernel adds, gets ENOSYS ("not in this kernel", which callers fall back from). Also:
// EPERM for clone with a CLONE_NEW* flag and ioctl TIOCSTI/TIOCLINUX; ENOSYS for io_uring,
// clone3, the new mount API and inotify; EINVAL for fcntl(F_NOTIFY); EAFNOSUPPORT for socket
// families other than unix, inet, inet6 and netlink; the process is killed (SIGSYS) on a
// foreign architecture's call (i386 int 0x80, x32). SECURITY.md counts what it lets through.
//
// Thread safe (pure function).
#ifndef SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_
#define SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandgate::sandbox::local {

// The BPF program as bytes (struct sock_filter array), ready to be written to bwrap.
absl::StatusOr<std::string> BuildSeccompFilter();

// The program of a libseccomp filter context (a scmp_filter_ctx, so that this header needs no
// libseccomp) as bytes: BuildSeccompFilter's last step, and the benchmarks' for the earlier
// denylist (tests/bench/sandbox/denylist_filter.cc).
absl::StatusOr<std::string> ExportBpf(void* ctx);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_SECCOMP_FILTER_H_
