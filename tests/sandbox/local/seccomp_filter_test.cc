// The seccomp filter's answers, read from the BPF program itself: a small classic-BPF
// interpreter runs the program bwrap loads over every x86_64 system call number, so the counts
// in SECURITY.md are the program's, not a reading of the source lists.
#include "sandbox/local/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

#if defined(__x86_64__)

// Runs a seccomp BPF program on one system call as the kernel would; fails the test on an
// instruction it does not know (libseccomp emits only loads, ALU AND, jumps and returns).
uint32_t Run(const std::string& program, const seccomp_data& data) {
  std::vector<sock_filter> insns(program.size() / sizeof(sock_filter));
  memcpy(insns.data(), program.data(), insns.size() * sizeof(sock_filter));
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < insns.size(); ++pc) {
    const sock_filter& i = insns[pc];
    auto jump = [&](bool taken) { pc += taken ? i.jt : i.jf; };
    uint32_t src = BPF_SRC(i.code) == BPF_X ? x : i.k;
    switch (i.code) {
      case BPF_LD | BPF_W | BPF_ABS: {
        EXPECT_LE(i.k + 4, sizeof(data));
        memcpy(&a, reinterpret_cast<const char*>(&data) + i.k, 4);
        break;
      }
      case BPF_LD | BPF_IMM:
        a = i.k;
        break;
      case BPF_LDX | BPF_IMM:
        x = i.k;
        break;
      case BPF_LD | BPF_MEM:
        a = mem[i.k];
        break;
      case BPF_LDX | BPF_MEM:
        x = mem[i.k];
        break;
      case BPF_ST:
        mem[i.k] = a;
        break;
      case BPF_STX:
        mem[i.k] = x;
        break;
      case BPF_MISC | BPF_TAX:
        x = a;
        break;
      case BPF_MISC | BPF_TXA:
        a = x;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
      case BPF_ALU | BPF_AND | BPF_X:
        a &= src;
        break;
      case BPF_JMP | BPF_JA:
        pc += i.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
      case BPF_JMP | BPF_JEQ | BPF_X:
        jump(a == src);
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
      case BPF_JMP | BPF_JGT | BPF_X:
        jump(a > src);
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
      case BPF_JMP | BPF_JGE | BPF_X:
        jump(a >= src);
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
      case BPF_JMP | BPF_JSET | BPF_X:
        jump((a & src) != 0);
        break;
      case BPF_RET | BPF_K:
        return i.k;
      case BPF_RET | BPF_A:
        return a;
      default:
        ADD_FAILURE() << "BPF instruction 0x" << std::hex << i.code << " at " << std::dec << pc;
        return SECCOMP_RET_KILL_PROCESS;
    }
  }
  ADD_FAILURE() << "the program ran off its end";
  return SECCOMP_RET_KILL_PROCESS;
}

uint32_t Answer(const std::string& program, int nr, std::vector<uint64_t> args = {},
                uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = arch;
  for (size_t i = 0; i < args.size() && i < 6; ++i) d.args[i] = args[i];
  return Run(program, d);
}

constexpr uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | static_cast<uint32_t>(e); }

int Nr(const char* name) { return seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name); }

// The x86_64 table of kernel 6.18: 0-334 and 424-469 (335-423 were never used).
std::vector<int> X86_64Table() {
  std::vector<int> nrs;
  for (int nr = 0; nr <= 334; ++nr) nrs.push_back(nr);
  for (int nr = 424; nr <= 469; ++nr) nrs.push_back(nr);
  return nrs;
}

class SeccompFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = BuildSeccompFilter();
    ASSERT_TRUE(p.ok()) << p.status();
    program_ = *p;
  }
  std::string program_;
};

// The figures of SECURITY.md: of the 381 numbers of the table, how many the filter lets
// reach the kernel (always, or depending on the arguments) and how many it answers itself.
TEST_F(SeccompFilterTest, CountsWhatReachesTheKernel) {
  // Argument sets that tell a rule on an argument from none: zeros, all ones, and the values
  // the argument rules look at.
  const std::vector<std::vector<uint64_t>> arg_sets = {{0, 0, 0, 0, 0, 0},
                                                       {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull},
                                                       {AF_INET, TIOCSTI, 0, 0, 0, 0},
                                                       {AF_PACKET, F_NOTIFY, 0, 0, 0, 0},
                                                       {CLONE_NEWUSER, 1, 0, 0, 0, 0}};
  std::vector<std::string> allowed, conditional;
  int denied = 0;
  for (int nr : X86_64Table()) {
    int allows = 0;
    for (const auto& args : arg_sets) {
      if (Answer(program_, nr, args) == SECCOMP_RET_ALLOW) ++allows;
    }
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
    std::string shown = name ? name : absl::StrCat("#", nr);
    free(name);
    if (allows == static_cast<int>(arg_sets.size())) {
      allowed.push_back(shown);
    } else if (allows > 0) {
      conditional.push_back(shown);
    } else {
      ++denied;
    }
  }
  std::cout << program_.size() / sizeof(sock_filter) << " BPF instructions; of "
            << X86_64Table().size() << " x86_64 system calls: " << allowed.size() << " allowed, "
            << conditional.size() << " allowed depending on arguments ("
            << absl::StrJoin(conditional, ", ") << "), " << denied << " denied\n";
  EXPECT_THAT(conditional, ::testing::UnorderedElementsAre("clone", "fcntl", "ioctl", "socket"));
  // An allowlist: well under Docker's ~350, and everything it does not name is denied.
  EXPECT_LT(allowed.size(), 300u);
  EXPECT_GT(denied, 90);
}

// The point of an allowlist: a call the filter does not name is refused, also one a newer
// kernel adds. The earlier denylist let all of these through to the host kernel.
TEST_F(SeccompFilterTest, CallsItDoesNotNameAreRefused) {
  for (const char* name : {"sysfs", "ustat", "memfd_secret", "modify_ldt", "remap_file_pages",
                           "_sysctl", "mseal", "statmount", "lsm_get_self_attr"}) {
    int nr = Nr(name);
    if (nr < 0) continue;  // unknown to this libseccomp: covered by the numbers below
    EXPECT_EQ(Answer(program_, nr), Errno(ENOSYS)) << name;
  }
  // Calls of kernels newer than libseccomp 2.5.4 (statmount 457 ... file_setattr 469) and
  // beyond the table.
  for (int nr : {457, 458, 459, 462, 467, 469, 470, 1000}) {
    EXPECT_EQ(Answer(program_, nr), Errno(ENOSYS)) << nr;
  }
  // Cross-process descriptor theft and memory advice, allowed before: EPERM now.
  EXPECT_EQ(Answer(program_, Nr("pidfd_getfd")), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("process_madvise")), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("get_mempolicy")), Errno(EPERM));
}

TEST_F(SeccompFilterTest, NamedAnswersStayAsBefore) {
  EXPECT_EQ(Answer(program_, Nr("keyctl")), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("mount")), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("unshare")), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("io_uring_setup")), Errno(ENOSYS));
  EXPECT_EQ(Answer(program_, Nr("clone3")), Errno(ENOSYS));
  EXPECT_EQ(Answer(program_, Nr("inotify_init1")), Errno(ENOSYS));
  EXPECT_EQ(Answer(program_, Nr("fsopen")), Errno(ENOSYS));
  // clone: plain fork and threads pass, any namespace flag is EPERM.
  EXPECT_EQ(Answer(program_, Nr("clone"), {SIGCHLD}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Answer(program_, Nr("clone"), {CLONE_VM | CLONE_THREAD | CLONE_SIGHAND}),
            SECCOMP_RET_ALLOW);
  for (uint64_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWCGROUP}) {
    EXPECT_EQ(Answer(program_, Nr("clone"), {flag | SIGCHLD}), Errno(EPERM)) << flag;
  }
  // ioctl and fcntl: all but TIOCSTI/TIOCLINUX and F_NOTIFY, high bits masked.
  EXPECT_EQ(Answer(program_, Nr("ioctl"), {0, FIONREAD}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Answer(program_, Nr("ioctl"), {0, TIOCSTI}), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("ioctl"), {0, (1ull << 32) | TIOCSTI}), Errno(EPERM));
  EXPECT_EQ(Answer(program_, Nr("fcntl"), {0, F_GETFL}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Answer(program_, Nr("fcntl"), {0, (1ull << 32) | F_NOTIFY}), Errno(EINVAL));
  // socket: four families.
  for (int f : {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}) {
    EXPECT_EQ(Answer(program_, Nr("socket"), {static_cast<uint64_t>(f)}), SECCOMP_RET_ALLOW) << f;
  }
  for (uint64_t f : {uint64_t{AF_PACKET}, uint64_t{40} /* AF_VSOCK */, uint64_t{AF_MAX},
                     uint64_t{0x7fffffff}, uint64_t{(1ull << 32) | AF_PACKET}}) {
    EXPECT_EQ(Answer(program_, Nr("socket"), {f}), Errno(EAFNOSUPPORT)) << f;
  }
}

// What the playbooks, Python, Node, git, shells, coreutils and compilers were seen to call
// (strace -f of the financial analysis, the probe, `git clone`, `node -e`, `cc`, `pip
// --version`), besides what every process does.
TEST_F(SeccompFilterTest, WhatOrdinaryProgramsCallIsAllowed) {
  for (const char* name : {"read",
                           "write",
                           "openat",
                           "close",
                           "newfstatat",
                           "statx",
                           "mmap",
                           "mprotect",
                           "munmap",
                           "brk",
                           "rt_sigaction",
                           "rt_sigprocmask",
                           "rt_sigreturn",
                           "pread64",
                           "access",
                           "faccessat2",
                           "pipe2",
                           "dup2",
                           "dup3",
                           "execve",
                           "exit_group",
                           "wait4",
                           "vfork",
                           "getrandom",
                           "rseq",
                           "set_robust_list",
                           "set_tid_address",
                           "prlimit64",
                           "futex",
                           "sched_getaffinity",
                           "getdents64",
                           "lseek",
                           "fcntl",
                           "ioctl",
                           "getcwd",
                           "chdir",
                           "readlink",
                           "uname",
                           "sysinfo",
                           "clock_gettime",
                           "clock_nanosleep",
                           "epoll_create1",
                           "epoll_ctl",
                           "epoll_pwait",
                           "epoll_wait",
                           "eventfd2",
                           "memfd_create",
                           "madvise",
                           "mremap",
                           "socket",
                           "connect",
                           "sendto",
                           "recvfrom",
                           "getsockopt",
                           "setsockopt",
                           "getpeername",
                           "getsockname",
                           "poll",
                           "ppoll",
                           "pselect6",
                           "select",
                           "unlink",
                           "unlinkat",
                           "rename",
                           "renameat2",
                           "mkdir",
                           "rmdir",
                           "fchmod",
                           "fchown",
                           "utimensat",
                           "close_range",
                           "copy_file_range",
                           "sendfile",
                           "fallocate",
                           "ftruncate",
                           "flock",
                           "fsync",
                           "fdatasync",
                           "kill",
                           "tgkill",
                           "getpid",
                           "gettid",
                           "setsid",
                           "setpgid",
                           "prctl",
                           "arch_prctl",
                           "sigaltstack",
                           "membarrier",
                           "statfs",
                           "fstatfs",
                           "ptrace",
                           "process_vm_readv",
                           "pidfd_open",
                           "waitid",
                           "sched_yield",
                           "capget",
                           "umask",
                           "getxattr",
                           "lgetxattr",
                           "fgetxattr",
                           "timerfd_create",
                           "timerfd_settime",
                           "signalfd4",
                           "shmget",
                           "semget",
                           "mlock",
                           "clone"}) {
    int nr = Nr(name);
    ASSERT_GE(nr, 0) << name;
    EXPECT_EQ(Answer(program_, nr, {AF_INET, FIONREAD}), SECCOMP_RET_ALLOW) << name;
  }
}

TEST_F(SeccompFilterTest, AForeignArchitectureIsKilled) {
  EXPECT_EQ(Answer(program_, 20, {}, AUDIT_ARCH_I386), SECCOMP_RET_KILL_PROCESS);
  EXPECT_EQ(Answer(program_, 0x40000000 | 39), SECCOMP_RET_KILL_PROCESS);  // x32 getpid
}

#endif  // __x86_64__

}  // namespace
}  // namespace sandgate::sandbox::local
