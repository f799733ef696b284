// What a session's cgroups say it uses now: memory, CPU time, processes. Read from the files
// the kernel keeps, on any layout SessionCgroups makes (cgroups.h):
//
//   memory     v2 memory.current (and memory.max), else v1 memory.usage_in_bytes (and
//              memory.limit_in_bytes, "no limit" when it is the kernel's huge default)
//   CPU time   v2 cpu.stat usage_usec (present in every v2 cgroup, with or without the cpu
//              controller: the hybrid layout's tracking cgroup has it), else v1 cpuacct.usage
//   processes  v2 pids.current, else v1 pids.current
//
//   CgroupUsageFiles files;
//   files.unified = "/sys/fs/cgroup/unified/sandgate/sandgate-abc";
//   sandbox::ResourceUsage u = ReadCgroupUsage(files);   // u.unmeasured says what was not
//
// A plain function of the files: tests give it a directory of fake ones.
#ifndef SANDGATE_SANDBOX_LOCAL_CGROUP_USAGE_H_
#define SANDGATE_SANDBOX_LOCAL_CGROUP_USAGE_H_

#include <string>

#include "sandbox/sandbox.h"

namespace sandgate::sandbox::local {

// The session's cgroup directories; empty when the session has none in that hierarchy.
struct CgroupUsageFiles {
  std::string unified;          // the v2 cgroup
  bool unified_memory = false;  // it has the memory controller (memory.current)
  bool unified_pids = false;    // it has the pids controller (pids.current)
  std::string memory_v1;
  std::string cpu_v1;  // cpu,cpuacct (v1 only exists when the session has a CPU cap)
  std::string pids_v1;
};

// Never fails: a figure that no file gives stays 0 and is named in `unmeasured`.
ResourceUsage ReadCgroupUsage(const CgroupUsageFiles& files);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_CGROUP_USAGE_H_
