// futex_shim: keeps a process's absolute futex waits on the kernel's clock while libfaketime
// shifts the clock the process reads (fault_harness.py preloads both).
//
// abseil's timed waits (absl::Mutex::AwaitWithDeadline, absl::CondVar::WaitWithDeadline, and so
// every Clock::AwaitWithDeadline of sandgated) call syscall(SYS_futex, …,
// FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME, abs_timeout) with a deadline computed from the
// faked absl::Now(). libfaketime does not see that call, so the kernel would wait until the
// faked deadline on its own clock: every wait of a replica stepped 30 s ahead would last 30 s
// longer, and one stepped behind would spin. Neither is what a wrong clock does to a host (its
// kernel's clock is wrong too), so this shim moves the deadline back by the offset that
// libfaketime applies: the number in $FAKETIME_TIMESTAMP_FILE ("+30", "-8"), read at most once a
// second.
//
//   cc -shared -fPIC -O2 -o futex_shim.so futex_shim.c -ldl
//   LD_PRELOAD="futex_shim.so libfaketimeMT.so.1" FAKETIME_TIMESTAMP_FILE=… sandgated …
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

typedef long (*syscall_fn)(long, ...);

// The offset in seconds, re-read when a second has passed on the monotonic clock (which
// libfaketime leaves alone with DONT_FAKE_MONOTONIC). Racy reads of a double cached across
// threads are harmless here: any value read was the file's at some moment.
static double Offset(void) {
  static double offset = 0;
  static time_t read_at = -1;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (read_at >= 0 && now.tv_sec == read_at) return offset;
  read_at = now.tv_sec;
  const char* path = getenv("FAKETIME_TIMESTAMP_FILE");
  FILE* f = path ? fopen(path, "re") : NULL;
  if (f == NULL) return offset;
  double v;
  if (fscanf(f, "%lf", &v) == 1) offset = v;
  fclose(f);
  return offset;
}

long syscall(long number, ...) {
  static syscall_fn real = NULL;
  if (real == NULL) real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
  va_end(ap);
  struct timespec moved;
  if (number == SYS_futex && (a[1] & FUTEX_CLOCK_REALTIME) && a[3] != 0) {
    const struct timespec* abs_timeout = (const struct timespec*)a[3];
    const double offset = Offset();
    long long ns = (long long)abs_timeout->tv_sec * 1000000000LL + abs_timeout->tv_nsec -
                   (long long)(offset * 1e9);
    if (ns < 0) ns = 0;
    moved.tv_sec = ns / 1000000000LL;
    moved.tv_nsec = ns % 1000000000LL;
    a[3] = (long)&moved;
  }
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
