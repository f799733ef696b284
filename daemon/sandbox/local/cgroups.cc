#include "sandbox/local/cgroups.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/unique_fd.h"
#include "sandbox/local/cgroup_usage.h"

namespace sandgate::sandbox::local {
namespace {

constexpr absl::string_view kCgroupRoot = "/sys/fs/cgroup";

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

absl::Status WriteText(const std::string& path, absl::string_view value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return errors::FromErrno(errno, path);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return errors::FromErrno(errno, absl::StrCat(path, " <- ", value));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Creates `path`; if its parent is gone (removed by another process sharing the parent name,
// e.g. a test binary's cleanup, between DetectCgroups and now), recreates the parent first.
absl::Status MakeDir(const std::string& path) {
  for (int attempt = 0;; ++attempt) {
    if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
    if (errno != ENOENT || attempt == 3) return errors::FromErrno(errno, path);
    const std::string parent = path.substr(0, path.rfind('/'));
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return errors::FromErrno(errno, parent);
    }
  }
}

// Joins a mount point and a cgroup path from /proc/self/cgroup, minus the mount's root.
std::string Join(const std::string& mountpoint, const std::string& mount_root,
                 absl::string_view own) {
  if (mount_root != "/") absl::ConsumePrefix(&own, mount_root);
  std::string dir = mountpoint;
  if (!own.empty() && own != "/") absl::StrAppend(&dir, own);
  return dir;
}

// Value of `key` in a "key value" per line file (memory.oom_control, memory.events).
uint64_t KeyedValue(const std::string& path, absl::string_view key) {
  std::string text;
  if (!ReadText(path, &text)) return 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) continue;
    uint64_t v = 0;
    if (absl::SimpleAtoi(line, &v)) return v;
  }
  return 0;
}

std::vector<pid_t> Procs(const std::string& dir) {
  std::string text;
  std::vector<pid_t> pids;
  if (!ReadText(dir + "/cgroup.procs", &text)) return pids;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

// Ends every process in one cgroup: cgroup.kill on v2; freeze, kill, thaw on the v1 freezer;
// otherwise repeated kills of whatever cgroup.procs lists (a fork can race that last way,
// which is why it is only the fallback).
void KillCgroup(const std::string& dir) {
  if (Exists(dir + "/cgroup.kill")) {
    if (WriteText(dir + "/cgroup.kill", "1").ok()) return;
  }
  const bool freezer = Exists(dir + "/freezer.state");
  if (freezer) (void)WriteText(dir + "/freezer.state", "FROZEN");
  for (pid_t pid : Procs(dir)) kill(pid, SIGKILL);
  if (freezer) (void)WriteText(dir + "/freezer.state", "THAWED");
}

bool Populated(const std::string& dir) {
  if (!Exists(dir)) return false;
  if (Exists(dir + "/cgroup.events")) return KeyedValue(dir + "/cgroup.events", "populated") != 0;
  return !Procs(dir).empty();
}

absl::Status KillAndRemoveDirs(const std::vector<std::string>& dirs, absl::Duration wait,
                               Clock& clock) {
  // The kernel empties a killed cgroup within milliseconds; look again that often.
  constexpr absl::Duration kRetry = absl::Milliseconds(2);
  for (const std::string& d : dirs) {
    if (Exists(d)) KillCgroup(d);
  }
  const absl::Time deadline = clock.Now() + wait;
  absl::Status result;
  for (const std::string& d : dirs) {
    for (;;) {
      if (!Exists(d)) break;
      int err = EBUSY;
      if (!Populated(d)) {
        if (rmdir(d.c_str()) == 0 || errno == ENOENT) break;
        err = errno;
      }
      // One last look at the deadline itself, then give up.
      if (clock.Now() >= deadline) {
        result.Update(errors::FromErrno(err, absl::StrCat("remove cgroup ", d)));
        break;
      }
      KillCgroup(d);
      clock.SleepUntil(std::min(clock.Now() + kRetry, deadline));
    }
  }
  return result;
}

struct Mount {
  std::string point;
  std::string root;
};

}  // namespace

absl::string_view CgroupLayoutName(CgroupLayout layout) {
  switch (layout) {
    case CgroupLayout::kUnified:
      return "unified";
    case CgroupLayout::kHybrid:
      return "hybrid";
    case CgroupLayout::kLegacy:
      return "legacy";
  }
  return "unknown";
}

std::map<std::string, std::string> LocateOwnCgroups(absl::string_view mountinfo,
                                                    absl::string_view self_cgroup) {
  // Mount points: v1 by controller name, v2 under the key "". The first mount wins.
  std::map<std::string, Mount> mounts;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 3 >= f.size()) continue;
    const std::string& fstype = f[dash + 1];
    const Mount m{f[4], f[3]};
    if (fstype == "cgroup2") {
      mounts.emplace("", m);
    } else if (fstype == "cgroup") {
      for (absl::string_view opt : absl::StrSplit(f[dash + 3], ',')) {
        mounts.emplace(std::string(opt), m);
      }
    }
  }
  std::map<std::string, std::string> own;
  for (absl::string_view line : absl::StrSplit(self_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    // "0::/path" is v2; "4:memory:/path" or "1:cpu,cpuacct:/path" is v1.
    std::vector<std::string> controllers = absl::StrSplit(f[1], ',');
    if (f[0] == "0" && f[1].empty()) controllers = {""};
    for (const std::string& c : controllers) {
      auto m = mounts.find(c);
      if (m != mounts.end()) own[c] = Join(m->second.point, m->second.root, f[2]);
    }
  }
  return own;
}

absl::StatusOr<CgroupHost> DetectCgroups(absl::string_view parent_name) {
  CgroupHost host;
  struct statfs sfs;
  if (statfs(std::string(kCgroupRoot).c_str(), &sfs) == 0 &&
      static_cast<uint64_t>(sfs.f_type) == CGROUP2_SUPER_MAGIC) {
    host.layout = CgroupLayout::kUnified;
  } else if (statfs("/sys/fs/cgroup/unified", &sfs) == 0 &&
             static_cast<uint64_t>(sfs.f_type) == CGROUP2_SUPER_MAGIC) {
    host.layout = CgroupLayout::kHybrid;
  }

  std::string mountinfo, self_cgroup;
  if (!ReadText("/proc/self/mountinfo", &mountinfo) ||
      !ReadText("/proc/self/cgroup", &self_cgroup)) {
    return errors::Unavailable("cannot read /proc/self/mountinfo or /proc/self/cgroup");
  }
  const std::map<std::string, std::string> own = LocateOwnCgroups(mountinfo, self_cgroup);

  // Makes "<own>/<parent_name>" in one hierarchy; returns "" and sets *note on failure.
  auto parent_dir = [&](const std::string& controller, std::string* note) -> std::string {
    auto o = own.find(controller);
    if (o == own.end()) {
      *note = controller.empty()
                  ? "no cgroup2 hierarchy is mounted"
                  : absl::StrCat("no cgroup v1 ", controller, " controller is mounted");
      return "";
    }
    std::string dir = absl::StrCat(o->second, "/", parent_name);
    absl::Status s = MakeDir(dir);
    if (!s.ok()) {
      *note = absl::StrCat("cannot create ", dir, " (", s.message(), ")");
      return "";
    }
    return dir;
  };

  if (host.layout != CgroupLayout::kUnified) {
    host.memory_v1 = parent_dir("memory", &host.memory_note);
    host.pids_v1 = parent_dir("pids", &host.pids_note);
    std::string freezer_note;
    host.freezer_v1 = parent_dir("freezer", &freezer_note);
    host.cpu_v1 = parent_dir("cpu", &host.cpu_note);
    if (host.layout == CgroupLayout::kHybrid) {
      host.unified = parent_dir("", &host.kill_note);
    } else if (host.freezer_v1.empty()) {
      host.kill_note = freezer_note;
    }
    return host;
  }

  // Pure v2: the controllers must be delegated to the daemon's cgroup and enabled for the
  // "sandgate" parent. A cgroup that holds processes cannot enable controllers for its
  // children (no internal processes), so the daemon moves itself into "<own>/supervisor"
  // once, as systemd's DelegateSubgroup would.
  host.unified = parent_dir("", &host.kill_note);
  if (host.unified.empty()) {
    host.memory_note = host.pids_note = host.cpu_note = host.kill_note;
    return host;
  }
  const std::string& own_dir = own.at("");
  std::string available;
  ReadText(own_dir + "/cgroup.controllers", &available);
  std::vector<std::string> ctl =
      absl::StrSplit(available, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  auto has = [&](absl::string_view c) { return std::find(ctl.begin(), ctl.end(), c) != ctl.end(); };
  auto enable = [&](absl::string_view c, std::string* note) {
    if (!has(c)) {
      *note = absl::StrCat("the ", c, " controller is not delegated to ", own_dir);
      return false;
    }
    absl::Status s = WriteText(own_dir + "/cgroup.subtree_control", absl::StrCat("+", c));
    if (!s.ok()) {
      const std::string supervisor = own_dir + "/supervisor";
      if (MakeDir(supervisor).ok() && WriteText(supervisor + "/cgroup.procs", "0").ok()) {
        s = WriteText(own_dir + "/cgroup.subtree_control", absl::StrCat("+", c));
      }
    }
    if (s.ok()) s = WriteText(host.unified + "/cgroup.subtree_control", absl::StrCat("+", c));
    if (!s.ok()) *note = absl::StrCat("cannot enable the ", c, " controller: ", s.message());
    return s.ok();
  };
  host.unified_memory = enable("memory", &host.memory_note);
  host.unified_pids = enable("pids", &host.pids_note);
  host.unified_cpu = enable("cpu", &host.cpu_note);
  return host;
}

SessionCgroups SessionCgroups::Plan(const CgroupHost& host, absl::string_view session_id,
                                    bool cpu) {
  SessionCgroups cg;
  const std::string leaf = absl::StrCat("/sandgate-", session_id);
  if (!host.memory_v1.empty()) cg.memory_ = host.memory_v1 + leaf;
  if (!host.pids_v1.empty()) cg.pids_ = host.pids_v1 + leaf;
  // The freezer is only needed to kill on legacy hosts; elsewhere cgroup.kill does it.
  if (!host.freezer_v1.empty() && host.unified.empty()) cg.freezer_ = host.freezer_v1 + leaf;
  if (cpu && !host.cpu_v1.empty()) cg.cpu_ = host.cpu_v1 + leaf;
  if (!host.unified.empty()) cg.unified_ = host.unified + leaf;
  cg.unified_memory_ = host.unified_memory;
  cg.unified_pids_ = host.unified_pids;
  cg.unified_cpu_ = cpu && host.unified_cpu;
  return cg;
}

std::vector<std::string> SessionCgroups::paths() const {
  std::vector<std::string> out;
  for (const std::string* p : {&memory_, &pids_, &freezer_, &cpu_, &unified_}) {
    if (!p->empty()) out.push_back(*p);
  }
  return out;
}

std::vector<std::string> SessionCgroups::Create(uint64_t memory_bytes, uint32_t max_processes,
                                                uint32_t cpu_millicores) {
  std::vector<std::string> warnings;
  auto make = [&](std::string* dir, absl::string_view what) {
    if (dir->empty()) return false;
    absl::Status s = MakeDir(*dir);
    if (!s.ok()) {
      warnings.push_back(absl::StrCat(what, " not enforced: ", s.message()));
      dir->clear();
      return false;
    }
    return true;
  };
  auto limit = [&](const std::string& file, uint64_t value, absl::string_view what) {
    absl::Status s = WriteText(file, absl::StrCat(value));
    if (!s.ok()) warnings.push_back(absl::StrCat(what, " not enforced: ", s.message()));
    return s.ok();
  };

  bool memory = false, pids = false;
  if (make(&memory_, "memory limit")) {
    memory = limit(memory_ + "/memory.limit_in_bytes", memory_bytes, "memory limit");
    // Without memsw the limit still holds for RAM; swap is then not counted.
    const std::string memsw = memory_ + "/memory.memsw.limit_in_bytes";
    if (memory && Exists(memsw)) limit(memsw, memory_bytes, "memory+swap limit");
  }
  if (make(&pids_, "process limit")) {
    pids = limit(pids_ + "/pids.max", max_processes, "process limit");
  }
  make(&freezer_, "cgroup kill (freezer)");
  // Quota per 100 ms period; the kernel's minimum quota is 1 ms.
  const uint64_t period = 100000, quota = std::max<uint64_t>(1000, cpu_millicores * 100ull);
  const bool cpu_v1_planned = !cpu_.empty();
  bool cpu = false;
  if (cpu_millicores > 0 && make(&cpu_, "CPU limit")) {
    cpu = limit(cpu_ + "/cpu.cfs_period_us", period, "CPU limit") &&
          limit(cpu_ + "/cpu.cfs_quota_us", quota, "CPU limit");
  }
  if (make(&unified_, "cgroup tracking")) {
    if (unified_memory_ && !memory) {
      memory = limit(unified_ + "/memory.max", memory_bytes, "memory limit");
      (void)WriteText(unified_ + "/memory.swap.max", "0");
    }
    if (unified_pids_ && !pids)
      pids = limit(unified_ + "/pids.max", max_processes, "process limit");
    if (unified_cpu_ && cpu_millicores > 0 && !cpu) {
      absl::Status st = WriteText(unified_ + "/cpu.max", absl::StrCat(quota, " ", period));
      cpu = st.ok();
      if (!st.ok()) warnings.push_back(absl::StrCat("CPU limit not enforced: ", st.message()));
    }
  }
  if (cpu_millicores > 0 && !cpu_v1_planned && !unified_cpu_) {
    warnings.push_back("CPU limit not enforced: no cpu controller available");
  }
  return warnings;
}

std::vector<std::string> SessionCgroups::v1_dirs() const {
  std::vector<std::string> out;
  for (const std::string* p : {&memory_, &pids_, &freezer_, &cpu_}) {
    if (!p->empty()) out.push_back(*p);
  }
  return out;
}

ResourceUsage SessionCgroups::Usage() const {
  CgroupUsageFiles files;
  files.unified = unified_;
  files.unified_memory = unified_memory_;
  files.unified_pids = unified_pids_;
  files.memory_v1 = memory_;
  files.cpu_v1 = cpu_;
  files.pids_v1 = pids_;
  return ReadCgroupUsage(files);
}

uint64_t SessionCgroups::OomKillCount() const {
  if (!memory_.empty()) return KeyedValue(memory_ + "/memory.oom_control", "oom_kill");
  if (!unified_.empty() && unified_memory_)
    return KeyedValue(unified_ + "/memory.events", "oom_kill");
  return 0;
}

absl::Status SessionCgroups::KillAndRemove(absl::Duration wait, Clock& clock) {
  // The tracking cgroup (v2 or freezer) goes first: it kills race-free.
  std::vector<std::string> dirs;
  for (const std::string* p : {&unified_, &freezer_, &memory_, &pids_, &cpu_}) {
    if (!p->empty()) dirs.push_back(*p);
  }
  return KillAndRemoveDirs(dirs, wait, clock);
}

absl::Status KillAndRemoveCgroups(const std::vector<std::string>& dirs, absl::Duration wait,
                                  Clock& clock) {
  for (const std::string& d : dirs) {
    absl::string_view base = d;
    size_t slash = base.rfind('/');
    if (slash != absl::string_view::npos) base.remove_prefix(slash + 1);
    if (!absl::StartsWith(d, absl::StrCat(kCgroupRoot, "/")) ||
        !absl::StartsWith(base, "sandgate-") || absl::StrContains(d, "/../")) {
      return errors::InvalidArgument(absl::StrCat("journal names a non-sandgate cgroup: ", d));
    }
  }
  return KillAndRemoveDirs(dirs, wait, clock);
}

}  // namespace sandgate::sandbox::local
