// The start-up probe of gVisor's kvm platform (gvisor_probe.h), with fake runsc binaries: one
// that hangs at boot as Debian 12's runsc does on kvm here (tests/fakes/runsc_hangs.sh), one
// that fails, one that starts. The timeout is a rule of time: proved on a fake clock, not
// before it and at it.
#include "sandbox/local/gvisor_probe.h"

#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/local/bwrap_provider.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_journal.h"
#include "tests/sandbox/local/sandbox_test_util.h"

namespace sandgate::sandbox {
namespace {

using ::sandgate::testing::FakeClock;
using ::sandgate::testing::FakeJournal;
using ::sandgate::testing::ProcessesInCgroups;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);

class GvisorProbeTest : public ::testing::Test {
 protected:
  // A provider whose config asks for kvm, with `runsc` as its runsc.
  BwrapOptions KvmOptions(const std::string& runsc) {
    BwrapOptions opts;
    opts.init_path = SANDGATE_TEST_INIT_PATH;
    opts.uid_base = 200000 + (getpid() % 1000) * 64 + 32;  // bwrap_provider_test's pool 1
    opts.uid_pool_size = 8;
    opts.cgroup_parent = "sandgate-test";
    opts.runsc_path = runsc;
    opts.gvisor_platform = "kvm";
    opts.kvm_device = fake_kvm_.path();
    opts.clock = &clock_;
    opts.gvisor_probe_timeout = kTimeout;
    return opts;
  }

  static SessionSpec Spec(const std::string& id, Isolation isolation) {
    SessionSpec spec;
    spec.id = id;
    spec.isolation = isolation;
    return spec;
  }

  ::sandgate::testing::FakeKvmDevice fake_kvm_;
  FakeClock clock_;
  FakeJournal journal_;
};

const ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(
    new ::sandgate::testing::CgroupParentCleanup("sandgate-test"));

TEST_F(GvisorProbeTest, AHangingRunscIsGivenUpAtTheTimeoutAndGvisorSessionsAreRefusedSayingWhy) {
  absl::StatusOr<std::unique_ptr<BwrapProvider>> provider = absl::UnknownError("not created");
  absl::Notification created;
  std::thread start([&] {
    provider = BwrapProvider::Create(KvmOptions(FAKE_RUNSC_HANGS), &journal_);
    created.Notify();
  });
  // The probe's runsc is up and hangs: the provider waits for it on the clock.
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(kTimeout - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_FALSE(created.HasBeenNotified()) << "gave up before the timeout";
  clock_.Advance(absl::Nanoseconds(1));
  start.join();
  ASSERT_TRUE(provider.ok()) << provider.status();

  // Nothing of the probe is left: its cgroup (and the fake's sleep in it) is gone.
  std::vector<std::string> dirs;
  ::sandgate::testing::FindDirs("/sys/fs/cgroup", "sandgate-gvisor-probe", 0, &dirs);
  EXPECT_TRUE(dirs.empty()) << dirs.front();

  for (const SessionSpec& spec : {Spec("kvm-probe-1", Isolation::kGvisor)}) {
    absl::Status checked = (*provider)->CheckSpec(spec);
    EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition) << checked;
    EXPECT_THAT(checked.message(),
                HasSubstr("isolation gvisor is not available on this host: runsc --platform=kvm "
                          "did not start a sandbox within 10s"));
    EXPECT_THAT(checked.message(), HasSubstr("set local.gvisor_platform to \"ptrace\""));
    EXPECT_THAT(checked.message(), HasSubstr("runsc said: fake runsc: booting the sandbox on"));
    absl::StatusOr<std::unique_ptr<Session>> s = (*provider)->Create(spec, nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.status().message(), HasSubstr("did not start a sandbox within 10s"));
  }
  // namespaces sessions are not affected.
  absl::StatusOr<std::unique_ptr<Session>> s =
      (*provider)->Create(Spec("kvm-probe-2", Isolation::kNamespaces), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(::sandgate::testing::RunCommand(s->get(), {"/bin/echo", "ok"}).out, "ok\n");
  EXPECT_TRUE((*s)->Close().ok());
}

TEST_F(GvisorProbeTest, ARunscThatFailsIsNamedWithItsStatus) {
  auto provider = BwrapProvider::Create(KvmOptions("/bin/false"), &journal_);
  ASSERT_TRUE(provider.ok()) << provider.status();
  absl::Status checked = (*provider)->CheckSpec(Spec("kvm-probe-3", Isolation::kGvisor));
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checked.message(),
              HasSubstr("runsc --platform=kvm could not start a sandbox (exit status 1)"));
}

TEST_F(GvisorProbeTest, ARunscThatStartsInTimeLeavesGvisorAvailableWithoutWaitingOnTheClock) {
  // The fake clock never moves: an exit in time ends the wait by itself.
  auto provider = BwrapProvider::Create(KvmOptions("/bin/true"), &journal_);
  ASSERT_TRUE(provider.ok()) << provider.status();
  EXPECT_TRUE((*provider)->CheckSpec(Spec("kvm-probe-4", Isolation::kGvisor)).ok());
}

TEST(GvisorProbeArgvTest, ATinySandboxOnThePlatformAskedWithNoNetwork) {
  local::GvisorProbe probe;
  probe.runsc_path = "/usr/bin/runsc";
  probe.platform = "kvm";
  probe.state_dir = "/run/sg/probe";
  EXPECT_EQ(local::GvisorProbeArgv(probe),
            (std::vector<std::string>{"/usr/bin/runsc", "--root=/run/sg/probe", "--platform=kvm",
                                      "--network=none", "--ignore-cgroups", "do", "/bin/true"}));
}

}  // namespace
}  // namespace sandgate::sandbox
