// security_probe: tries one forbidden operation inside a sandbox and prints what happened.
//
// Usage: security_probe NAME...   prints "NAME RESULT" per probe, RESULT being "OK" or the
// errno name (EPERM, ENOSYS, EAFNOSUPPORT, ...). Static, so it runs from /work whatever the
// sandbox's /usr holds. "i386" makes a 32-bit system call, which the filter answers by
// killing the process (SIGSYS), so it prints "i386 ALIVE" only if that did not happen.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

static void Report(const char* name, long rc) {
  if (rc >= 0) {
    printf("%s OK\n", name);
  } else {
    const char* e = strerrorname_np(errno);
    printf("%s %s\n", name, e ? e : "E?");
  }
  fflush(stdout);
}

static long Probe(const char* name) {
  if (!strcmp(name, "keyctl")) return syscall(SYS_keyctl, 0 /*GET_KEYRING_ID*/, -3, 0);
  if (!strcmp(name, "add_key")) return syscall(SYS_add_key, "user", "k", "v", 1, -3);
  if (!strcmp(name, "io_uring_setup")) {
    char params[120] = {0};
    return syscall(SYS_io_uring_setup, 1, params);
  }
  if (!strcmp(name, "bpf")) {
    char attr[64] = {0};
    return syscall(SYS_bpf, 0, attr, sizeof(attr));
  }
  if (!strcmp(name, "perf_event_open")) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    return syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
  }
  if (!strcmp(name, "userfaultfd")) return syscall(SYS_userfaultfd, 0);
  if (!strcmp(name, "af_packet")) return socket(AF_PACKET, SOCK_RAW, 0);
  if (!strcmp(name, "af_vsock")) return socket(AF_VSOCK, SOCK_STREAM, 0);
  if (!strcmp(name, "af_inet")) return socket(AF_INET, SOCK_STREAM, 0);
  if (!strcmp(name, "clone_newuser")) {
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid((pid_t)pid, NULL, 0);
    return pid;
  }
  if (!strcmp(name, "unshare_user")) return unshare(CLONE_NEWUSER);
  if (!strcmp(name, "unshare_net")) return unshare(CLONE_NEWNET);
  if (!strcmp(name, "mount_tmpfs")) return mount("x", "/tmp", "tmpfs", 0, NULL);
  if (!strcmp(name, "tiocsti")) {
    char c = 'x';
    return ioctl(0, TIOCSTI, &c);
  }
  if (!strcmp(name, "ptrace_init")) return ptrace(PTRACE_ATTACH, 1, 0, 0);
  if (!strcmp(name, "settime")) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return clock_settime(CLOCK_REALTIME, &ts);
  }
  if (!strcmp(name, "sethostname")) return sethostname("x", 1);
  if (!strcmp(name, "getppid")) return syscall(SYS_getppid);
  if (!strcmp(name, "ioctl_fionread")) {
    int n;
    return ioctl(0, FIONREAD, &n);
  }
  if (!strcmp(name, "inotify_init")) return syscall(SYS_inotify_init);
  if (!strcmp(name, "inotify_init1")) return syscall(SYS_inotify_init1, IN_CLOEXEC);
  if (!strcmp(name, "fanotify_init")) return syscall(SYS_fanotify_init, 0, O_RDONLY);
  if (!strcmp(name, "dnotify")) {
    int dir = open("/usr", O_RDONLY | O_DIRECTORY);
    if (dir < 0) return -1;
    return fcntl(dir, F_NOTIFY, DN_CREATE | DN_MODIFY | DN_DELETE | DN_MULTISHOT);
  }
  // The kernel reads fcntl's cmd as an unsigned int: high bits must not slip past the filter.
  if (!strcmp(name, "dnotify_highbits")) {
    int dir = open("/usr", O_RDONLY | O_DIRECTORY);
    if (dir < 0) return -1;
    return syscall(SYS_fcntl, dir, (1UL << 32) | F_NOTIFY,
                   DN_CREATE | DN_MODIFY | DN_DELETE | DN_MULTISHOT);
  }
  // Calls the earlier denylist did not name, which reached the host kernel: another
  // process's descriptor (here our own stdout, through a pidfd), a file system table query,
  // secret memory, and the newest call of the x86_64 table (file_setattr, kernel 6.17).
  if (!strcmp(name, "pidfd_getfd")) {
    long pidfd = syscall(SYS_pidfd_open, getpid(), 0);
    if (pidfd < 0) return -1;
    return syscall(SYS_pidfd_getfd, pidfd, 1, 0);
  }
  if (!strcmp(name, "sysfs")) return syscall(139 /* sysfs */, 3);
  if (!strcmp(name, "memfd_secret")) return syscall(447 /* memfd_secret */, 0);
  if (!strcmp(name, "newest")) {
    errno = 0;
    return syscall(469 /* file_setattr */, -1, "", NULL, 0, 0);
  }
#if defined(__x86_64__)
  if (!strcmp(name, "i386")) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20 /* i386 getpid */) : "memory");
    printf("i386 ALIVE %ld\n", ret);
    return 0;
  }
  if (!strcmp(name, "x32")) {
    long ret = syscall(0x40000000L | 39 /* x32 getpid */);
    printf("x32 ALIVE %ld\n", ret);
    return 0;
  }
#endif
  errno = EINVAL;
  return -1;
}

int main(int argc, char** argv) {
  // "loop N NAME": N calls of one probe, for benchmarks.
  if (argc == 4 && !strcmp(argv[1], "loop")) {
    long n = atol(argv[2]);
    for (long i = 0; i < n; ++i) Probe(argv[3]);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    long rc = Probe(argv[i]);
    if (!strcmp(argv[i], "i386") || !strcmp(argv[i], "x32")) continue;
    Report(argv[i], rc);
  }
  return 0;
}
