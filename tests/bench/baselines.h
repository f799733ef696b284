// What the session benchmarks compare against, measured in the same process and the same run
// as the figure beside them (this machine is shared and noisy; only same-run ratios mean
// anything):
//   - BareBwrapTrue: bubblewrap with the local provider's own flags (binds, seccomp filter,
//     data fds, the session's file systems mounted and unmounted within the time) running
//     /usr/bin/true, forked from a spawner thread as a pool uid and reaped; no cgroups, no
//     init, no daemon. What starting any sandbox at all costs.
//   - ForkExecTrue: fork + execve + waitpid of /bin/true from the calling process.
//
//   sandgate::bench::BareBwrap bare(mount_dir, uid);   // once; as root
//   double ms = bare.Run();
//
// Failures end the benchmark (exit 1) with a message: a baseline that did not run would make
// every ratio beside it meaningless. Not thread safe.
#ifndef SANDGATE_TESTS_BENCH_BASELINES_H_
#define SANDGATE_TESTS_BENCH_BASELINES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sandbox/local/bwrap_command.h"
#include "sandbox/local/spawner.h"

namespace sandgate::bench {

class BareBwrap {
 public:
  // `mount_dir` as BwrapOptions::mount_dir (its /dev is prepared here if no provider did);
  // `uid` must be outside every running provider's pool.
  BareBwrap(std::string mount_dir, uid_t uid,
            const std::string& init_path = "/usr/libexec/sandgate/sandgate-init");
  // One bare `bwrap … true`, in milliseconds.
  double Run();

 private:
  const std::string mount_dir_;
  const uid_t uid_;
  sandbox::local::BwrapConfig config_;
  sandbox::local::Spawner spawner_;
};

double ForkExecTrue();

// Median (mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v);

[[noreturn]] void Die(const absl::Status& s, const char* what);

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_BASELINES_H_
