#include "sandbox/local/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {
namespace {

// What a sandboxed process may call without conditions. The anchor is Docker's default
// profile (moby's profiles/seccomp/default.json: the calls it allows a container that holds
// no extra capability), with these differences:
//  - not here, though Docker allows them: io_uring_* (bypasses per-call filtering; moby
//    dropped it too, moby#46762), inotify_* and fanotify_mark (a watch on the host-bound /usr
//    reports the host's file activity; see kDenyEnosys), adjtimex, clock_adjtime,
//    name_to_handle_at, vmsplice, personality (refused as under the earlier denylist),
//    memfd_secret, modify_ldt, remap_file_pages, epoll_ctl_old, epoll_wait_old (exotic,
//    deprecated or never implemented; nothing the playbooks, Python, Node, git or a compiler
//    runs calls them);
//  - here, though Docker's plain list lacks them: ptrace and process_vm_readv (Docker allows
//    them on kernels >= 4.8; gdb and strace between the session's own processes), and calls of
//    kernels newer than that profile that only do what an allowed call does: fchmodat2,
//    cachestat, map_shadow_stack, futex_wake, futex_wait, futex_requeue.
// A name libseccomp does not know on the build's architecture is skipped (it stays denied).
// clang-format off
constexpr const char* kAllow[] = {
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep",
    "close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat",
    "faccessat2", "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2",
    "fchown", "fchownat", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
    "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex",
    "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "get_robust_list",
    "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid",
    "getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid",
    "getppid", "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "getrusage",
    "getsid", "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
    "ioprio_get", "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
    "landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listxattr",
    "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack",
    "membarrier", "memfd_create", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
    "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
    "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open",
    "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv",
    "preadv2", "prlimit64", "process_mrelease", "process_vm_readv", "pselect6", "ptrace",
    "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv",
    "recvfrom", "recvmmsg", "recvmsg", "removexattr", "rename", "renameat", "renameat2",
    "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select",
    "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto",
    "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid", "setfsuid", "setgid",
    "setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid",
    "setreuid", "setrlimit", "setsid", "setsockopt", "setuid", "setxattr", "shmat", "shmctl",
    "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair",
    "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
    "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
    "timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat",
    "utime", "utimensat", "utimes", "vfork", "wait4", "waitid", "write", "writev",
};

// Refused with EPERM, the answer a container without the capability gets, for the calls that
// let code leave or attack the sandbox (the earlier denylist, kept so callers see the same
// answers: mount, namespaces, keyrings, bpf, perf, userfaultfd, module and clock calls).
// Every other call outside kAllow is ENOSYS, the default.
constexpr const char* kDenyEperm[] = {
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm", "uselib", "personality",
    "lookup_dcookie", "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "bpf",
    "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "kcmp", "pidfd_getfd", "process_vm_writev",
    "process_madvise", "move_pages", "migrate_pages", "mbind", "set_mempolicy",
    "get_mempolicy", "set_mempolicy_home_node", "vmsplice", "nfsservctl", "vhangup",
    "sethostname", "setdomainname",
};
// clang-format on
// The default answer, ENOSYS, reads as "this kernel has no such call", which callers handle
// by falling back (glibc retries clone3 as clone; statx, close_range, faccessat2 and
// epoll_pwait2 have fallbacks too), where EPERM would read as a failure. libseccomp refuses a
// rule that repeats the default, so these are left out of kAllow with a reason: inotify, because a
// watch on the host-bound /usr (or /etc files) would report the host's own file activity to the
// sandbox, and tools poll instead (tail -f, watchdog, libuv/node fs.watch); fanotify (EPERM above)
// and dnotify (fcntl F_NOTIFY, EINVAL below, as on a file system that does not support it) watch
// the same events.
constexpr scmp_datum_t kNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                            CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                            CLONE_NEWCGROUP};
constexpr scmp_datum_t kAnyNamespaceFlag = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                                           CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                           CLONE_NEWCGROUP;
// Families below AF_MAX that stay allowed: everything else gets EAFNOSUPPORT.
bool AllowedFamily(int f) {
  return f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK;
}

struct CtxDeleter {
  void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};

absl::Status Check(int rc, absl::string_view what) {
  if (rc < 0) return errors::FromErrno(-rc, absl::StrCat("seccomp: ", what));
  return absl::OkStatus();
}

// The kernel reads these commands and families as 32 bits: the comparisons mask the upper
// half, so high bits set by the caller cannot slip past a rule.
scmp_arg_cmp Low32Is(unsigned arg, scmp_datum_t value) {
  return SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, value);
}

// Adds the patterns (mask, value) that together match every 32-bit value but `excluded`,
// each value once: the complement of a few leaves of the binary trie of 32-bit values, from
// bit `bit` down, under `prefix`.
void Complement(uint32_t prefix, int bit, const std::vector<uint32_t>& excluded,
                std::vector<std::pair<uint32_t, uint32_t>>* out) {
  if (bit < 0) return;  // the prefix is an excluded value
  const uint32_t mask = ~((uint32_t{1} << bit) - 1) | (uint32_t{1} << bit);
  for (uint32_t side : {0u, 1u}) {
    const uint32_t p = prefix | (side << bit);
    std::vector<uint32_t> below;
    for (uint32_t v : excluded) {
      if (((v >> bit) & 1u) == side) below.push_back(v);
    }
    if (below.empty()) {
      out->push_back({mask, p});
    } else {
      Complement(p, bit - 1, below, out);
    }
  }
}

// Allows `syscall` unless the low 32 bits of argument `arg` are one of `excluded`, which get
// `refusal`. With a default that refuses, libseccomp has no "otherwise allow" for one syscall
// (an unconditional allow would win over the refusals), so the allow is spelled as the
// patterns that match every other value: about 32 masked comparisons per excluded value, each
// value matched by exactly one rule. The kernel reads the argument as 32 bits, so the upper
// half is ignored by every rule.
absl::Status AllowAllBut(scmp_filter_ctx c, int syscall, unsigned arg,
                         const std::vector<uint32_t>& excluded, uint32_t refusal,
                         absl::string_view what) {
  std::vector<std::pair<uint32_t, uint32_t>> allowed;
  Complement(0, 31, excluded, &allowed);
  absl::Status s;
  for (const auto& [mask, value] : allowed) {
    s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ALLOW, syscall, 1,
                                    SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, value)),
                   what));
  }
  for (uint32_t value : excluded) {
    s.Update(Check(seccomp_rule_add(c, refusal, syscall, 1, Low32Is(arg, value)), what));
  }
  return s;
}

}  // namespace

absl::StatusOr<std::string> BuildSeccompFilter() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ERRNO(ENOSYS)));
  if (!ctx) return errors::Internal("seccomp_init failed");
  scmp_filter_ctx c = ctx.get();
  absl::Status s =
      Check(seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "bad arch action");
  // bwrap sets no_new_privs itself; the filter must not try to.
  s.Update(Check(seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0), "nnp"));
  // A binary tree over the syscall numbers: a call that is not in the kernel's allow cache
  // (ioctl, fcntl, socket, clone and every refusal) walks O(log n) comparisons, not a list.
  s.Update(Check(seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2), "optimize"));
  auto add = [&](const char* name, uint32_t action) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // unknown on this architecture
    s.Update(Check(seccomp_rule_add(c, action, nr, 0), name));
  };
  for (const char* name : kAllow) add(name, SCMP_ACT_ALLOW);
  for (const char* name : kDenyEperm) add(name, SCMP_ACT_ERRNO(EPERM));

  // clone: allowed without namespace flags; EPERM with any (clone3, whose flags a filter
  // cannot read, is ENOSYS by default and glibc falls back to clone).
  s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, kAnyNamespaceFlag, 0)),
                 "clone"));
  for (scmp_datum_t flag : kNamespaceFlags) {
    s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                    SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
                   "clone flags"));
  }
  // fcntl and ioctl: allowed but for dnotify and injecting input into a terminal.
  s.Update(AllowAllBut(c, SCMP_SYS(fcntl), 1, {F_NOTIFY}, SCMP_ACT_ERRNO(EINVAL), "fcntl"));
  s.Update(
      AllowAllBut(c, SCMP_SYS(ioctl), 1, {TIOCSTI, TIOCLINUX}, SCMP_ACT_ERRNO(EPERM), "ioctl"));
  // socket: unix, inet, inet6 and netlink; EAFNOSUPPORT for every other family.
  for (int family = 0; family < AF_MAX; ++family) {
    uint32_t action = AllowedFamily(family) ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EAFNOSUPPORT);
    s.Update(Check(seccomp_rule_add(c, action, SCMP_SYS(socket), 1,
                                    Low32Is(0, static_cast<scmp_datum_t>(family))),
                   "socket family"));
  }
  s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                  SCMP_A0(SCMP_CMP_GE, AF_MAX, 0)),
                 "socket family"));
  if (!s.ok()) return s;

  return ExportBpf(c);
}

absl::StatusOr<std::string> ExportBpf(void* ctx) {
  UniqueFd mem(memfd_create("sandgate-seccomp", MFD_CLOEXEC));
  if (!mem.valid()) return errors::FromErrno(errno, "memfd_create");
  SANDGATE_RETURN_IF_ERROR(Check(seccomp_export_bpf(ctx, mem.get()), "export"));
  off_t size = lseek(mem.get(), 0, SEEK_END);
  if (size <= 0) return errors::Internal("seccomp: empty BPF program");
  std::string bpf(static_cast<size_t>(size), '\0');
  if (pread(mem.get(), bpf.data(), bpf.size(), 0) != size) {
    return errors::FromErrno(errno, "seccomp: read back BPF");
  }
  return bpf;
}

}  // namespace sandgate::sandbox::local
