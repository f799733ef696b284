// What a load test looks at on the host after the daemons are gone: processes left running as
// sandbox uids, session cgroup directories, and latency percentiles. Shared by load_chaos
// (one daemon) and cluster_chaos (three replicas).
//
//   int left = sandgate::load::LiveProcessesWithUids(330000, 256);   // 0 after a clean drain
//
// Plain functions; thread safe.
#ifndef SANDGATE_TESTS_LOAD_LEAK_CHECKS_H_
#define SANDGATE_TESTS_LOAD_LEAK_CHECKS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace sandgate::load {

// Live (non-zombie) processes whose real uid is in [base, base + count).
int LiveProcessesWithUids(uint32_t base, uint32_t count);

// Session cgroup directories (sandgate-s…) anywhere in the cgroup mounts, any daemon's.
std::set<std::string> SessionCgroups();

// Of SessionCgroups(), those of `sessions` (ids as stored: kept sessions' and each run's own,
// "s" + the run id's hex), each printed to stderr: other daemons on the machine (another
// checkout's tests) make cgroups of their own, which are not this test's leaks.
int LeakedCgroups(const std::set<std::string>& sessions);

// The p-quantile (0..1) of `v`, 0 when empty.
double Percentile(std::vector<double> v, double p);

}  // namespace sandgate::load

#endif  // SANDGATE_TESTS_LOAD_LEAK_CHECKS_H_
