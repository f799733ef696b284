// Control groups for local sandboxes: detecting the host's layout, creating one set of
// cgroups per session with memory and pid limits, counting OOM kills, killing and removing.
//
// Three layouts (isolation.md §2):
//   unified  /sys/fs/cgroup is cgroup2: one v2 cgroup per session with memory.max and
//            pids.max (needs a delegated subtree with the controllers), killed via cgroup.kill.
//   hybrid   v1 controllers plus a cgroup2 at /sys/fs/cgroup/unified without controllers:
//            v1 memory and pids set the limits, a v2 cgroup tracks and kills (cgroup.kill).
//   legacy   v1 only: memory and pids set the limits, the freezer (if mounted) kills.
// A CPU share cap, when asked for, is v1 cpu (cfs quota) or v2 cpu.max.
// Session cgroups are "<own cgroup>/<parent>/sandgate-<id>" in each hierarchy, where <own
// cgroup> is the daemon's. Nothing here fails a session: what cannot be set up becomes a
// warning that names the limit that is not enforced and why.
//
//   SANDGATE_ASSIGN_OR_RETURN(CgroupHost host, DetectCgroups("sandgate"));
//   SessionCgroups cg = SessionCgroups::Plan(host, "abc");
//   journal details <- cg.paths();
//   std::vector<std::string> warnings = cg.Create(64 << 20, 256);
//   plan.join_v1 = cg.v1_dirs(); plan.join_v2 = cg.v2_dir();  // the spawned child joins
//   cg.KillAndRemove(absl::Seconds(2), *Clock::Real());
//
// Thread safety: CgroupHost is an immutable value. A SessionCgroups is not thread safe except
// OomKillCount() and Usage(), which only read the kernel.
#ifndef SANDGATE_SANDBOX_LOCAL_CGROUPS_H_
#define SANDGATE_SANDBOX_LOCAL_CGROUPS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "sandbox/sandbox.h"

namespace sandgate::sandbox::local {

enum class CgroupLayout { kLegacy, kHybrid, kUnified };

absl::string_view CgroupLayoutName(CgroupLayout layout);

// Where session cgroups go on this host. An empty directory means "not available"; the
// matching *_note then says why, in words fit for a Warnings() line.
struct CgroupHost {
  CgroupLayout layout = CgroupLayout::kLegacy;
  std::string memory_v1;  // parent directory in the v1 memory hierarchy
  std::string pids_v1;
  std::string freezer_v1;
  std::string cpu_v1;
  std::string unified;          // parent directory in the v2 hierarchy
  bool unified_memory = false;  // v2 parent offers the memory controller
  bool unified_pids = false;
  bool unified_cpu = false;
  std::string memory_note;
  std::string pids_note;
  std::string cpu_note;
  std::string kill_note;
};

// The daemon's own cgroup directory per hierarchy, keyed by v1 controller name ("memory",
// "pids", "name=systemd", ...) or "" for cgroup2, from the text of /proc/self/mountinfo and
// /proc/self/cgroup. Hierarchies that are not mounted are absent.
std::map<std::string, std::string> LocateOwnCgroups(absl::string_view mountinfo,
                                                    absl::string_view self_cgroup);

// Reads statfs, /proc/self/mountinfo and /proc/self/cgroup, and creates the `parent_name`
// directories under the daemon's own cgroups (kept for later sessions). Fails only when
// /proc cannot be read.
absl::StatusOr<CgroupHost> DetectCgroups(absl::string_view parent_name);

class SessionCgroups {
 public:
  SessionCgroups() = default;
  // Computes the paths only; no I/O. `cpu`: the session will have a CPU cap (a v1 cpu
  // cgroup is then part of the plan).
  static SessionCgroups Plan(const CgroupHost& host, absl::string_view session_id,
                             bool cpu = false);

  // Every directory this session may create, for the journal.
  std::vector<std::string> paths() const;
  // Creates the directories and writes the limits. `cpu_millicores` caps the session's CPU
  // share (1000 = one core, as v1 cpu.cfs_quota_us / v2 cpu.max over a 100 ms period); 0 =
  // no cap (and Plan should not have planned a cpu cgroup). Returns one warning per limit or
  // facility that is not in force.
  std::vector<std::string> Create(uint64_t memory_bytes, uint32_t max_processes,
                                  uint32_t cpu_millicores = 0);
  // Created v1 directories (memory, pids, freezer, cpu) and the v2 one ("" if none): where a
  // new sandbox process must be placed.
  std::vector<std::string> v1_dirs() const;
  const std::string& v2_dir() const { return unified_; }
  // Memory, CPU time and processes now (cgroup_usage.h).
  ResourceUsage Usage() const;
  // OOM kills so far in the session's memory cgroup; 0 when there is none.
  uint64_t OomKillCount() const;
  // Kills every process in the session's cgroups, waits up to `wait` of `clock` for them to
  // be empty, and removes them. Idempotent.
  absl::Status KillAndRemove(absl::Duration wait, Clock& clock);

 private:
  std::string memory_;  // created directories; empty when absent
  std::string pids_;
  std::string freezer_;
  std::string cpu_;
  std::string unified_;
  bool unified_memory_ = false;
  bool unified_pids_ = false;
  bool unified_cpu_ = false;
};

// Kills, empties and removes the given cgroup directories (deepest first is the caller's
// order). Only directories below /sys/fs/cgroup whose name starts with "sandgate-" are
// touched: the paths come from a journal that this code does not otherwise trust.
absl::Status KillAndRemoveCgroups(const std::vector<std::string>& dirs, absl::Duration wait,
                                  Clock& clock);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_CGROUPS_H_
