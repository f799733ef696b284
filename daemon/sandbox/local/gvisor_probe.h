// The start-up check of gVisor's platform: whether runsc can start a sandbox at all on it.
//
// Debian 12's runsc (2022-12) hangs at boot with --platform=kvm under nested virtualization
// (this project's machine kind has /dev/kvm, and `runsc --platform=kvm do true` never
// returns there). Without a check, every gVisor session would hang until its start timeout.
// So when the configuration asks for kvm, the provider starts one tiny sandbox first:
//
//   runsc --root=<dir> --platform=kvm --network=none --ignore-cgroups do /bin/true
//
// in a cgroup of its own ("sandgate-gvisor-probe", like a session's), and gives it `timeout`
// of `clock`. Exit 0 in time is OK; anything else is FAILED_PRECONDITION saying what runsc
// did (hung past the timeout, exited with a status and its last stderr line) and what to do.
// Whatever the probe started is killed with its cgroup and its state directory removed.
//
// Thread compatible (one probe at a time per state directory).
#ifndef SANDGATE_SANDBOX_LOCAL_GVISOR_PROBE_H_
#define SANDGATE_SANDBOX_LOCAL_GVISOR_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "sandbox/local/cgroups.h"
#include "sandbox/local/exit_watcher.h"
#include "sandbox/local/spawner.h"

namespace sandgate::sandbox::local {

struct GvisorProbe {
  std::string runsc_path;
  std::string platform;   // what the sessions would be given
  std::string state_dir;  // runsc --root; made and removed by the probe
  absl::Duration timeout = absl::Seconds(10);
};

// The probe's runsc argv (argv[0] = runsc_path).
std::vector<std::string> GvisorProbeArgv(const GvisorProbe& probe);

// Runs the probe. `clock` times only the wait for runsc; the kill afterwards waits on the
// kernel (the cgroup emptying), on the real clock.
absl::Status RunGvisorProbe(const GvisorProbe& probe, Spawner& spawner, ExitWatcher& watcher,
                            const CgroupHost& cgroups, Clock& clock);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_GVISOR_PROBE_H_
