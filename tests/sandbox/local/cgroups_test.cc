// Layout detection from /proc text: hybrid (this project's hosts), legacy, pure v2, and a
// container whose cgroup mounts show a non-root subtree. And the limits a session's cgroups
// get on a pure v2 and a legacy host, written into a directory standing in for cgroupfs
// (this hybrid VM cannot mount either).
#include "sandbox/local/cgroups.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::sandbox::local {
namespace {

using Dirs = std::map<std::string, std::string>;

TEST(LocateOwnCgroupsTest, Hybrid) {
  const char* mountinfo =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const char* self =
      "8:pids:/\n"
      "4:memory:/process_api/f5c7\n"
      "1:cpu,cpuacct:/\n"
      "0::/\n";
  EXPECT_EQ(LocateOwnCgroups(mountinfo, self),
            (Dirs{{"", "/sys/fs/cgroup/unified"},
                  {"cpu", "/sys/fs/cgroup/cpu,cpuacct"},
                  {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
                  {"memory", "/sys/fs/cgroup/memory/process_api/f5c7"},
                  {"pids", "/sys/fs/cgroup/pids"}}));
}

TEST(LocateOwnCgroupsTest, LegacyWithoutCgroup2) {
  const char* mountinfo =
      "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n";
  const char* self = "6:freezer:/a\n4:memory:/a\n3:pids:/a\n";  // pids not mounted
  EXPECT_EQ(LocateOwnCgroups(mountinfo, self),
            (Dirs{{"freezer", "/sys/fs/cgroup/freezer/a"}, {"memory", "/sys/fs/cgroup/memory/a"}}));
}

TEST(LocateOwnCgroupsTest, UnifiedUnderSystemd) {
  const char* mountinfo =
      "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 "
      "rw,nsdelegate,memory_recursiveprot\n";
  const char* self = "0::/system.slice/sandgated.service\n";
  EXPECT_EQ(LocateOwnCgroups(mountinfo, self),
            (Dirs{{"", "/sys/fs/cgroup/system.slice/sandgated.service"}}));
}

TEST(LocateOwnCgroupsTest, ContainerMountOfASubtree) {
  const char* mountinfo = "700 690 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n";
  const char* self = "0::/docker/abc/worker\n";
  EXPECT_EQ(LocateOwnCgroups(mountinfo, self), (Dirs{{"", "/sys/fs/cgroup/worker"}}));
}

TEST(DetectCgroupsTest, ThisHostIsDetected) {
  auto host = DetectCgroups("sandgate-test");
  ASSERT_TRUE(host.ok()) << host.status();
  // Whatever the layout, each limit is either available or explained.
  EXPECT_TRUE(!host->memory_v1.empty() || host->unified_memory || !host->memory_note.empty());
  EXPECT_TRUE(!host->pids_v1.empty() || host->unified_pids || !host->pids_note.empty());
  if (host->layout == CgroupLayout::kHybrid) {
    EXPECT_FALSE(host->unified.empty());
  }
}

// A temporary directory playing the cgroup hierarchies' parents.
class FakeCgroupFs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-cgfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // What the kernel does on mkdir in a cgroupfs: the control files appear (Create only
  // writes files that exist, as cgroupfs offers no O_CREAT).
  void KernelMakes(const std::string& dir, std::initializer_list<const char*> files) {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
    for (const char* f : files) std::ofstream(dir + "/" + f);
  }
  std::string root_;
};

TEST_F(FakeCgroupFs, PureV2SessionGetsMemorySwapPidsAndCpuInOneCgroup) {
  CgroupHost host;
  host.layout = CgroupLayout::kUnified;
  host.unified = root_;
  host.unified_memory = host.unified_pids = host.unified_cpu = true;
  SessionCgroups cg = SessionCgroups::Plan(host, "s1", /*cpu=*/true);
  EXPECT_EQ(cg.paths(), std::vector<std::string>{root_ + "/sandgate-s1"});
  EXPECT_TRUE(cg.v1_dirs().empty()) << "no v1 hierarchy to join";
  KernelMakes(root_ + "/sandgate-s1",
              {"memory.max", "memory.swap.max", "pids.max", "cpu.max", "cgroup.kill"});
  std::vector<std::string> warnings = cg.Create(64 << 20, 256, /*cpu_millicores=*/500);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  const std::string dir = root_ + "/sandgate-s1";
  EXPECT_EQ(cg.v2_dir(), dir);
  EXPECT_EQ(Read(dir + "/memory.max"), "67108864");
  EXPECT_EQ(Read(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(Read(dir + "/pids.max"), "256");
  EXPECT_EQ(Read(dir + "/cpu.max"), "50000 100000") << "half a core per 100 ms";
  std::ofstream(dir + "/memory.events") << "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n";
  EXPECT_EQ(cg.OomKillCount(), 2u);
}

TEST_F(FakeCgroupFs, PureV2WithoutDelegatedControllersSaysWhatIsNotEnforced) {
  CgroupHost host;
  host.layout = CgroupLayout::kUnified;
  host.unified = root_;  // tracking and cgroup.kill only
  SessionCgroups cg = SessionCgroups::Plan(host, "s2", /*cpu=*/true);
  std::vector<std::string> warnings = cg.Create(64 << 20, 256, 500);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "CPU limit not enforced: no cpu controller available");
  EXPECT_EQ(Read(root_ + "/sandgate-s2/memory.max"), "") << "not written where it is not offered";
  EXPECT_EQ(cg.OomKillCount(), 0u);
}

TEST_F(FakeCgroupFs, LegacySessionUsesV1ControllersAndTheFreezer) {
  for (const char* h : {"memory", "pids", "freezer", "cpu"}) {
    ASSERT_EQ(mkdir((root_ + "/" + h).c_str(), 0755), 0);
  }
  CgroupHost host;
  host.layout = CgroupLayout::kLegacy;
  host.memory_v1 = root_ + "/memory";
  host.pids_v1 = root_ + "/pids";
  host.freezer_v1 = root_ + "/freezer";
  host.cpu_v1 = root_ + "/cpu";
  SessionCgroups cg = SessionCgroups::Plan(host, "s3", /*cpu=*/true);
  EXPECT_EQ(cg.v1_dirs().size(), 4u);
  EXPECT_EQ(cg.v2_dir(), "");
  KernelMakes(root_ + "/memory/sandgate-s3", {"memory.limit_in_bytes"});  // no memsw: not written
  KernelMakes(root_ + "/pids/sandgate-s3", {"pids.max"});
  KernelMakes(root_ + "/cpu/sandgate-s3", {"cpu.cfs_period_us", "cpu.cfs_quota_us"});
  std::vector<std::string> warnings = cg.Create(32 << 20, 64, 2000);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_EQ(Read(root_ + "/memory/sandgate-s3/memory.limit_in_bytes"), "33554432");
  EXPECT_EQ(Read(root_ + "/pids/sandgate-s3/pids.max"), "64");
  EXPECT_EQ(access((root_ + "/freezer/sandgate-s3").c_str(), F_OK), 0) << "made, for the kill";
  EXPECT_EQ(Read(root_ + "/cpu/sandgate-s3/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(root_ + "/cpu/sandgate-s3/cpu.cfs_quota_us"), "200000") << "two cores";
  std::ofstream(root_ + "/memory/sandgate-s3/memory.oom_control")
      << "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
  EXPECT_EQ(cg.OomKillCount(), 1u);
}

}  // namespace
}  // namespace sandgate::sandbox::local

namespace sandgate::sandbox::local {
namespace {

// A session cgroup on a pure v2 host whose cgroup.events says it still holds processes.
class StuckCgroup : public FakeCgroupFs {
 protected:
  void SetUp() override {
    FakeCgroupFs::SetUp();
    CgroupHost host;
    host.layout = CgroupLayout::kUnified;
    host.unified = root_;
    cg_ = SessionCgroups::Plan(host, "stuck");
    dir_ = root_ + "/sandgate-stuck";
    KernelMakes(dir_, {"cgroup.kill", "cgroup.events"});
    cg_.Create(0, 0);
    std::ofstream(dir_ + "/cgroup.events") << "populated 1\nfrozen 0\n";
  }
  // KillAndRemove(5 s) on the fake clock, in a thread; `done` once it returned.
  void StartRemoving() {
    remover_ = std::thread([this] {
      result_ = cg_.KillAndRemove(absl::Seconds(5), clock_);
      done_.Notify();
    });
  }
  void TearDown() override {
    if (remover_.joinable()) {
      clock_.Advance(absl::Hours(1));
      remover_.join();
    }
    FakeCgroupFs::TearDown();
  }
  ::sandgate::testing::FakeClock clock_;
  SessionCgroups cg_;
  std::string dir_;
  std::thread remover_;
  absl::Status result_;
  absl::Notification done_;
};

// A cgroup that does not empty is given up on at the deadline of `wait`, not before.
TEST_F(StuckCgroup, RemovalGivesUpExactlyAtItsWait) {
  StartRemoving();
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(absl::Seconds(5) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_FALSE(done_.HasBeenNotified()) << "gave up before its wait";
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  remover_.join();
  EXPECT_EQ(result_.code(), absl::StatusCode::kInternal) << result_;  // EBUSY
  EXPECT_NE(result_.message().find("remove cgroup " + dir_), std::string::npos) << result_;
}

// A cgroup that empties while the removal waits is removed at the next look (2 ms later).
TEST_F(StuckCgroup, ACgroupThatEmptiesIsRemovedAtTheNextLook) {
  StartRemoving();
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  // The kernel's part: the processes are gone, so are the control files (rmdir of the
  // stand-in directory needs it empty).
  std::remove((dir_ + "/cgroup.events").c_str());
  std::remove((dir_ + "/cgroup.kill").c_str());
  clock_.Advance(absl::Milliseconds(2));
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  remover_.join();
  EXPECT_TRUE(result_.ok()) << result_;
  struct stat st;
  EXPECT_NE(stat(dir_.c_str(), &st), 0) << "the cgroup directory is removed";
}

}  // namespace
}  // namespace sandgate::sandbox::local
