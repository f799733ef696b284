#include "sandbox/local/bwrap_provider.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "sandbox/local/bwrap_session.h"
#include "sandbox/local/gvisor_probe.h"
#include "sandbox/local/seccomp_filter.h"
#include "sandbox/local/tmpfs_limits.h"

namespace sandgate::sandbox {
namespace {

// Host pids of live (non-zombie) processes whose real, effective, saved or fs uid is `uid`.
std::vector<pid_t> ProcessesOfUid(uid_t uid) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    bool zombie = false, match = false;
    while (std::getline(in, line)) {
      absl::string_view l = line;
      if (absl::ConsumePrefix(&l, "State:")) zombie = absl::StrContains(l, "Z");
      if (!absl::ConsumePrefix(&l, "Uid:")) continue;
      for (absl::string_view f : absl::StrSplit(l, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
        uid_t u = 0;
        if (absl::SimpleAtoi(f, &u) && u == uid) match = true;
      }
      break;
    }
    if (match && !zombie) out.push_back(pid);
  }
  closedir(d);
  return out;
}

absl::Status KillUid(uid_t uid, absl::Duration wait, Clock& clock) {
  constexpr absl::Duration kRetry = absl::Milliseconds(5);  // SIGKILLed processes die in µs
  const absl::Time deadline = clock.Now() + wait;
  for (;;) {
    std::vector<pid_t> pids = ProcessesOfUid(uid);
    if (pids.empty()) return absl::OkStatus();
    if (clock.Now() >= deadline) {
      return errors::Unavailable(
          absl::StrCat(pids.size(), " processes of uid ", uid, " survived SIGKILL"));
    }
    for (pid_t pid : pids) kill(pid, SIGKILL);
    clock.SleepUntil(std::min(clock.Now() + kRetry, deadline));
  }
}

// Fills core.runsc and core.gvisor_status: gVisor sessions need runsc and the bridge; kvm
// needs /dev/kvm, else ptrace serves (slower, same isolation).
void ConfigureGvisor(const BwrapOptions& options, BwrapProvider::Core& core) {
  local::RunscConfig& r = core.runsc;
  r.runsc_path = options.runsc_path;
  r.platform = local::GvisorPlatform(options.gvisor_platform, options.kvm_device);
  if (r.platform != options.gvisor_platform) {
    log::Warning("sandbox.gvisor_platform",
                 {{"wanted", options.gvisor_platform},
                  {"using", r.platform},
                  {"why", absl::StrCat(options.kvm_device, " is not usable")}});
  }
  r.gvisor_dir = absl::StrCat(options.mount_dir, "/gvisor");
  r.init_path = options.init_path;
  r.bridge_path = options.bridge_path;
  if (r.bridge_path.empty()) {
    r.bridge_path = absl::StrCat(options.init_path.substr(0, options.init_path.rfind('/')),
                                 "/sandgate-gvisor-bridge");
  }
  r.hostname = options.hostname;
  r.host_binds = core.bwrap.host_binds;
  if (r.platform != "ptrace" && r.platform != "kvm") {
    core.gvisor_status = errors::InvalidArgument(
        absl::StrCat("gvisor_platform \"", r.platform, "\": must be ptrace or kvm"));
  } else if (access(r.runsc_path.c_str(), X_OK) != 0) {
    core.gvisor_status = errors::FailedPrecondition(absl::StrCat(
        "runsc not found at ", r.runsc_path, " (Debian package runsc; deploy/setup.sh)"));
  } else if (access(r.bridge_path.c_str(), R_OK | X_OK) != 0) {
    core.gvisor_status = errors::FailedPrecondition(
        absl::StrCat("sandgate-gvisor-bridge not found at ", r.bridge_path));
  }
  if (core.gvisor_status.ok() && r.platform == "kvm") {
    // Debian 12's runsc may hang at boot on kvm (gvisor_probe.h): one tiny sandbox first,
    // so that sessions are refused saying why instead of each hanging to its start timeout.
    local::GvisorProbe probe;
    probe.runsc_path = r.runsc_path;
    probe.platform = r.platform;
    probe.state_dir = absl::StrCat(options.mount_dir, "/gvisor-platform-probe");
    probe.timeout = options.gvisor_probe_timeout;
    const absl::Time started = absl::Now();
    core.gvisor_status = local::RunGvisorProbe(probe, core.spawner, *core.exit_watcher,
                                               core.cgroups, *options.clock);
    log::Write(core.gvisor_status.ok() ? log::Level::kInfo : log::Level::kError,
               "sandbox.gvisor_probe",
               {{"platform", r.platform},
                {"ok", core.gvisor_status.ok()},
                {"took_ms", absl::ToInt64Milliseconds(absl::Now() - started)},
                {"error", std::string(core.gvisor_status.message())}});
  }
  log::Info("sandbox.gvisor", {{"available", core.gvisor_status.ok()},
                               {"platform", r.platform},
                               {"why_not", std::string(core.gvisor_status.message())}});
}

// Ends what a gVisor sandbox of a lost daemon left once its processes are dead: runsc's own
// record of it, then its directory (state, sockets, bundle).
absl::Status SweepGvisor(BwrapProvider::Core& core, const std::string& session_id) {
  // The id names a path: whatever the journal says, never one outside gvisor_dir.
  if (session_id.empty() || session_id.size() > 40 ||
      session_id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return errors::InvalidArgument(
        absl::StrCat("journal session id \"", session_id, "\" is not a session id"));
  }
  const local::RunscSandbox sandbox = local::RunscSandbox::Plan(core.runsc, session_id);
  if (access(sandbox.state_dir().c_str(), F_OK) == 0 && core.gvisor_status.ok()) {
    local::SpawnPlan plan;
    plan.path = core.runsc.runsc_path;
    plan.argv = local::RunscDeleteArgv(core.runsc, sandbox);
    absl::StatusOr<pid_t> pid = core.spawner.Spawn(plan);
    if (pid.ok()) waitpid(*pid, nullptr, 0);  // its verdict does not matter: the dir goes next
  }
  return local::RemoveRunscDir(sandbox);
}

}  // namespace

BwrapProvider::BwrapProvider(std::shared_ptr<Core> core) : core_(std::move(core)) {}
BwrapProvider::~BwrapProvider() = default;

absl::StatusOr<std::unique_ptr<BwrapProvider>> BwrapProvider::Create(const BwrapOptions& options,
                                                                     ResourceJournal* journal) {
  if (journal == nullptr) return errors::InvalidArgument("journal: required");
  if (access(options.bwrap_path.c_str(), X_OK) != 0) {
    return errors::FromErrno(errno, absl::StrCat("bwrap_path ", options.bwrap_path));
  }
  if (options.init_path.empty() || options.init_path.front() != '/' ||
      access(options.init_path.c_str(), R_OK | X_OK) != 0) {
    return errors::FailedPrecondition(
        absl::StrCat("init_path ", options.init_path, ": not an absolute path to an executable"));
  }
  if (options.uid_base < 1000 || options.uid_pool_size == 0) {
    return errors::InvalidArgument("uid_base must be >= 1000 and uid_pool_size > 0");
  }
  if (options.cgroup_parent.empty() || options.cgroup_parent.find('/') != std::string::npos) {
    return errors::InvalidArgument("cgroup_parent: must be one path component");
  }
  auto core = std::make_shared<Core>();
  core->options = options;
  core->journal = journal;
  SANDGATE_ASSIGN_OR_RETURN(core->cgroups, local::DetectCgroups(options.cgroup_parent));
  core->bwrap.bwrap_path = options.bwrap_path;
  core->bwrap.init_path = options.init_path;
  core->bwrap.hostname = options.hostname;
  SANDGATE_RETURN_IF_ERROR(local::PrepareDeviceNodes(options.mount_dir));
  core->bwrap.device_dir = absl::StrCat(options.mount_dir, "/dev");
  SANDGATE_ASSIGN_OR_RETURN(core->bwrap.seccomp_bpf, local::BuildSeccompFilter());
  if (options.disable_seccomp_for_benchmarks) {
    core->bwrap.seccomp_bpf.clear();
    log::Warning("sandbox.seccomp_disabled", {{"why", "disable_seccomp_for_benchmarks"}});
  } else if (!options.seccomp_bpf_for_benchmarks.empty()) {
    core->bwrap.seccomp_bpf = options.seccomp_bpf_for_benchmarks;
    log::Warning("sandbox.seccomp_replaced", {{"why", "seccomp_bpf_for_benchmarks"}});
  }
  for (const std::string& cidr : options.proxy_ssrf_exempt_cidrs) {
    absl::StatusOr<local::Cidr> c = local::Cidr::Parse(cidr);
    if (!c.ok()) {
      return errors::InvalidArgument(
          absl::StrCat("proxy_ssrf_exempt_cidrs: ", c.status().message()));
    }
    core->ssrf_exempt.push_back(*c);
  }
  SANDGATE_ASSIGN_OR_RETURN(
      core->proxy, local::NetProxy::Create(
                       options.resolver != nullptr ? options.resolver : local::NewSystemResolver(),
                       options.proxy_options));
  SANDGATE_ASSIGN_OR_RETURN(core->exit_watcher, local::ExitWatcher::Create());
  core->bwrap.host_binds = local::HostBinds();
  ConfigureGvisor(options, *core);
  {
    absl::MutexLock l(&core->mu);
    core->uid_used.assign(options.uid_pool_size, false);
  }
  log::Info("sandbox.local_provider", {{"cgroups", local::CgroupLayoutName(core->cgroups.layout)},
                                       {"memory_v1", core->cgroups.memory_v1},
                                       {"unified", core->cgroups.unified}});
  return std::unique_ptr<BwrapProvider>(new BwrapProvider(std::move(core)));
}

std::vector<std::string> BwrapProvider::SessionsOnRoot(const std::string& root_dir) const {
  std::vector<std::string> ids;
  absl::MutexLock l(&core_->mu);
  for (const auto& [id, root] : core_->live_roots) {
    if (root == root_dir) ids.push_back(id);
  }
  return ids;
}

absl::Status BwrapProvider::CheckSpec(const SessionSpec& spec) const {
  if (spec.isolation == Isolation::kGvisor) {
    SANDGATE_RETURN_IF_ERROR(local::GvisorAvailable(*core_));
  }
  return local::CheckRootDir(spec.root_dir);
}

absl::StatusOr<std::unique_ptr<Session>> BwrapProvider::Create(const SessionSpec& spec,
                                                               const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(auto session, local::BwrapSession::Start(core_, spec, cancel));
  return std::unique_ptr<Session>(std::move(session));
}

absl::Status BwrapProvider::Sweep(const JournalEntry& entry) {
  if (entry.provider != "local" || entry.kind != "session") {
    return errors::InvalidArgument(
        absl::StrCat("journal entry ", entry.id, " is not a local session"));
  }
  const nlohmann::json& d = entry.details;
  if (!d.is_object() || !d.contains("uid") || !d["uid"].is_number_unsigned()) {
    return errors::InvalidArgument(absl::StrCat("journal entry ", entry.id, ": no uid"));
  }
  const uint64_t uid = d["uid"].get<uint64_t>();
  const Core& c = *core_;
  // Never kill processes of a uid outside the pool, whatever the journal says.
  if (uid < c.options.uid_base || uid >= c.options.uid_base + c.options.uid_pool_size) {
    return errors::InvalidArgument(
        absl::StrCat("journal entry ", entry.id, ": uid ", uid, " is outside the sandbox pool"));
  }
  {
    absl::MutexLock l(&core_->mu);
    if (core_->uid_used[uid - c.options.uid_base]) {
      return errors::FailedPrecondition(
          absl::StrCat("journal entry ", entry.id, ": uid ", uid, " belongs to a live session"));
    }
  }
  std::vector<std::string> cgroups;
  if (d.contains("cgroups") && d["cgroups"].is_array()) {
    for (const nlohmann::json& p : d["cgroups"]) {
      if (p.is_string()) cgroups.push_back(p.get<std::string>());
    }
  }
  // The cgroups first (race-free kill), then whatever still runs as the uid elsewhere.
  absl::Status status = local::KillAndRemoveCgroups(cgroups, absl::Seconds(5), *c.options.clock);
  status.Update(KillUid(static_cast<uid_t>(uid), absl::Seconds(5), *c.options.clock));
  if (status.ok()) {
    status = local::SessionMounts::Plan(c.options.mount_dir, static_cast<uid_t>(uid)).Unmount();
  }
  if (status.ok() && d.contains("session") && d["session"].is_string()) {
    status = SweepGvisor(*core_, d["session"].get<std::string>());
  }
  if (!status.ok()) return status;
  log::Info("sandbox.swept", {{"entry", entry.id}, {"uid", uid}});
  return core_->journal->Erase(entry.id);
}

}  // namespace sandgate::sandbox
