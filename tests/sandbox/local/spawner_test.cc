// The spawner's contract for the child (sandbox/local/spawner.h): what it inherits, and how
// a failure before exec comes back. The child now runs in the daemon's memory until it execs
// (clone3 CLONE_VM | CLONE_VFORK), so these also check that nothing of the parent leaks into
// it: signal mask and dispositions, descriptors.
#include "sandbox/local/spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

using ::testing::HasSubstr;

// Runs `argv` through `spawner` with stdout to a pipe; returns what it wrote and its exit
// status.
std::pair<std::string, int> RunCaptured(Spawner& spawner, SpawnPlan plan) {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd r(fds[0]), w(fds[1]);
  plan.stdout_fd = w.get();
  absl::StatusOr<pid_t> pid = spawner.Spawn(plan);
  EXPECT_TRUE(pid.ok()) << pid.status();
  w.reset();
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(r.get(), buf, sizeof(buf))) > 0;) out.append(buf, n);
  int status = -1;
  if (pid.ok()) waitpid(*pid, &status, 0);
  return {out, status};
}

// The value of `field` ("SigBlk") in a /proc/<pid>/status text.
std::string StatusField(const std::string& status, const std::string& field) {
  size_t at = status.find(field + ":\t");
  if (at == std::string::npos) return "";
  at += field.size() + 2;
  return status.substr(at, status.find('\n', at) - at);
}

TEST(SpawnerTest, AFailureBeforeExecNamesTheStageAndLeavesNoChild) {
  Spawner spawner;
  SpawnPlan plan;
  plan.path = "/nonexistent/binary";
  plan.argv = {"binary"};
  absl::StatusOr<pid_t> pid = spawner.Spawn(plan);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("/nonexistent/binary: execve"));
  // The failed child was reaped by the spawner.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(SpawnerTest, TheChildStartsWithNoBlockedOrIgnoredSignalAndOnlyTheGivenFds) {
  // Blocked in the thread that makes the spawner thread (which inherits it), ignored in the
  // process: neither may reach the child.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  struct sigaction ign {
  }, old_ign{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGUSR2, &ign, &old_ign);
  Spawner spawner;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);

  UniqueFd leaked(open("/dev/null", O_RDONLY));  // not close-on-exec, not kept
  UniqueFd kept(open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnPlan plan;
  plan.path = "/bin/sh";
  plan.argv = {"sh", "-c", "cat /proc/self/status; ls /proc/$$/fd"};
  plan.keep_fds = {kept.get()};
  auto [out, status] = RunCaptured(spawner, plan);  // the status, then the fd listing
  sigaction(SIGUSR2, &old_ign, nullptr);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(StatusField(out, "SigBlk"), "0000000000000000");
  EXPECT_EQ(StatusField(out, "SigIgn"), "0000000000000000");
  EXPECT_THAT(out, HasSubstr(absl::StrCat("\n", kept.get(), "\n")));
  EXPECT_FALSE(absl::StrContains(out, absl::StrCat("\n", leaked.get(), "\n")))
      << "an fd that is neither stdio nor kept reached the child";
}

TEST(SpawnerTest, SpawnsOneAfterAnotherWithTheirOwnArguments) {
  Spawner spawner;
  for (int i = 0; i < 20; ++i) {
    SpawnPlan plan;
    plan.path = "/bin/echo";
    plan.argv = {"echo", absl::StrCat("run ", i)};
    auto [out, status] = RunCaptured(spawner, plan);
    EXPECT_EQ(out, absl::StrCat("run ", i, "\n"));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

TEST(SpawnerTest, TheChildRunsAsTheGivenUidAndGid) {
  Spawner spawner;
  SpawnPlan plan;
  plan.path = "/usr/bin/id";
  plan.uid = 190777;
  plan.gid = 190778;
  SpawnPlan uid_plan = plan;
  uid_plan.argv = {"id", "-u"};
  EXPECT_EQ(RunCaptured(spawner, uid_plan).first, "190777\n");
  SpawnPlan gid_plan = plan;
  gid_plan.argv = {"id", "-g"};
  EXPECT_EQ(RunCaptured(spawner, gid_plan).first, "190778\n");
}

}  // namespace
}  // namespace sandgate::sandbox::local
