// The seccomp filter local sandboxes ran under until issue 22 (a default-allow denylist),
// kept only so bench_security can measure the allowlist against it in the same run.
#include "tests/bench/sandbox/denylist_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "sandbox/local/seccomp_filter.h"

namespace sandgate::bench {
namespace {

// clang-format off
constexpr const char* kDenyEperm[] = {
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "stime", "iopl", "ioperm", "uselib",
    "personality", "lookup_dcookie", "mount", "umount", "umount2", "pivot_root", "chroot",
    "setns", "unshare", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
    "request_key", "fanotify_init", "open_by_handle_at", "name_to_handle_at", "kcmp",
    "process_vm_writev", "move_pages", "migrate_pages", "mbind", "set_mempolicy", "vmsplice",
    "nfsservctl", "vhangup", "sethostname", "setdomainname",
};
// ENOSYS makes callers fall back: glibc retries clone3 as clone, and nothing needs io_uring
// or the new mount API.
// inotify too: a watch on the host-bound /usr (or /etc files) would report the host's own file
// activity to the sandbox. ENOSYS reads as "kernel without inotify", which tools handle by
// polling (tail -f, watchdog, libuv/node fs.watch, inotifywait's callers); EPERM or EACCES
// would read as a failure to report. fanotify (EPERM below) and dnotify (fcntl F_NOTIFY,
// EINVAL below, as on a file system that does not support it) watch the same events.
constexpr const char* kDenyEnosys[] = {
    "clone3", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "inotify_init", "inotify_init1",
};
// clang-format on
constexpr scmp_datum_t kNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                            CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                            CLONE_NEWCGROUP};
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

}  // namespace

absl::StatusOr<std::string> BuildDenylistFilter() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return errors::Internal("seccomp_init failed");
  scmp_filter_ctx c = ctx.get();
  absl::Status s =
      Check(seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "bad arch action");
  // bwrap sets no_new_privs itself; the filter must not try to.
  s.Update(Check(seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0), "nnp"));
  auto deny = [&](const char* name, int err) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // unknown on this architecture
    s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(err), nr, 0), name));
  };
  for (const char* name : kDenyEperm) deny(name, EPERM);
  for (const char* name : kDenyEnosys) deny(name, ENOSYS);
  for (scmp_datum_t flag : kNamespaceFlags) {
    s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                    SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
                   "clone flags"));
  }
  // Masked: the kernel reads the command as 32 bits, so high bits set by the caller must not
  // slip past the comparison.
  s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(fcntl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, F_NOTIFY)),
                 "fcntl F_NOTIFY"));
  for (unsigned long req : {TIOCSTI, TIOCLINUX}) {
    s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, req)),
                   "ioctl"));
  }
  for (int family = 0; family < AF_MAX; ++family) {
    if (AllowedFamily(family)) continue;
    s.Update(Check(seccomp_rule_add(
                       c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(family))),
                   "socket family"));
  }
  s.Update(Check(seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                  SCMP_A0(SCMP_CMP_GE, AF_MAX, 0)),
                 "socket family"));
  if (!s.ok()) return s;

  return sandbox::local::ExportBpf(c);
}

}  // namespace sandgate::bench
