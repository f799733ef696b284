#include "sandbox/local/gvisor_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "sandbox/local/pidfd.h"
#include "sandbox/local/runsc_command.h"

namespace sandgate::sandbox::local {
namespace {

constexpr char kProbeCgroup[] = "gvisor-probe";
constexpr absl::Duration kKillWait = absl::Seconds(5);

// The probe's limits: runsc, its gofer and Sentry, and /bin/true.
constexpr uint64_t kProbeMemoryBytes = 512ull << 20;
constexpr uint32_t kProbeTasks = 1024;

// The last line runsc wrote to its stderr (at most 300 bytes of it), or "".
std::string LastLine(int fd) {
  const std::string text = DrainText(fd);
  return text.substr(text.rfind('\n') + 1, 300);
}

absl::Status RemoveStateDir(const std::string& dir) {
  RunscSandbox s;
  s.dir = dir;
  return RemoveRunscDir(s);
}

}  // namespace

std::vector<std::string> GvisorProbeArgv(const GvisorProbe& probe) {
  return {probe.runsc_path,
          absl::StrCat("--root=", probe.state_dir),
          absl::StrCat("--platform=", probe.platform),
          "--network=none",
          "--ignore-cgroups",
          "do",
          "/bin/true"};
}

absl::Status RunGvisorProbe(const GvisorProbe& probe, Spawner& spawner, ExitWatcher& watcher,
                            const CgroupHost& host, Clock& clock) {
  const std::string what = absl::StrCat("runsc --platform=", probe.platform);
  // What a daemon killed during its probe left.
  SessionCgroups cgroups = SessionCgroups::Plan(host, kProbeCgroup, false);
  SANDGATE_RETURN_IF_ERROR(KillAndRemoveCgroups(cgroups.paths(), kKillWait, *Clock::Real()));
  SANDGATE_RETURN_IF_ERROR(RemoveStateDir(probe.state_dir));
  if (mkdir(probe.state_dir.c_str(), 0700) != 0) {
    return errors::FromErrno(errno, absl::StrCat("mkdir ", probe.state_dir));
  }
  for (const std::string& w : cgroups.Create(kProbeMemoryBytes, kProbeTasks, 0)) {
    log::Debug("sandbox.gvisor_probe_cgroup", {{"warning", w}});
  }
  int ep[2];
  if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) return errors::FromErrno(errno, "pipe");
  UniqueFd err_r(ep[0]), err_w(ep[1]);
  SpawnPlan plan;
  plan.path = probe.runsc_path;
  plan.argv = GvisorProbeArgv(probe);
  plan.stderr_fd = err_w.get();
  plan.join_v1 = cgroups.v1_dirs();
  plan.join_v2 = cgroups.v2_dir();
  const absl::Time started = clock.Now();
  absl::StatusOr<pid_t> pid = spawner.Spawn(plan);
  err_w.reset();
  if (!pid.ok()) {
    cgroups.KillAndRemove(kKillWait, *Clock::Real()).IgnoreError();
    RemoveStateDir(probe.state_dir).IgnoreError();
    return pid.status();
  }
  UniqueFd pidfd(PidfdOpen(*pid));
  CancelToken exited;
  const uint64_t watch =
      pidfd.valid() ? watcher.Watch(pidfd.get(), [&exited] { exited.Cancel("runsc exited"); }) : 0;
  if (!pidfd.valid()) exited.Cancel("no pidfd");  // wait below, without a timeout
  clock.SleepUntil(started + probe.timeout, &exited);
  if (watch != 0) watcher.Unwatch(watch);
  const bool in_time = exited.cancelled();
  // The sandbox's processes first (runsc's gofer and Sentry may outlive runsc), then runsc.
  absl::Status cleanup = cgroups.KillAndRemove(kKillWait, *Clock::Real());
  if (!in_time) kill(*pid, SIGKILL);
  int status = 0;
  waitpid(*pid, &status, 0);
  cleanup.Update(RemoveStateDir(probe.state_dir));
  if (!cleanup.ok()) {
    log::Warning("sandbox.gvisor_probe_cleanup", {{"error", cleanup.ToString()}});
  }
  const std::string said = LastLine(err_r.get());
  if (!in_time) {
    return errors::FailedPrecondition(
        absl::StrCat(what, " did not start a sandbox within ", absl::FormatDuration(probe.timeout),
                     " (Debian 12's runsc hangs at boot on kvm under nested virtualization); set "
                     "local.gvisor_platform to \"ptrace\"",
                     said.empty() ? "" : absl::StrCat("; runsc said: ", said)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return errors::FailedPrecondition(
        absl::StrCat(what, " could not start a sandbox (",
                     WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                       : absl::StrCat("killed by signal ", WTERMSIG(status)),
                     said.empty() ? ")" : absl::StrCat("): ", said)));
  }
  return absl::OkStatus();
}

}  // namespace sandgate::sandbox::local
