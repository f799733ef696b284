// Layout detection from /proc text: hybrid (this project's hosts), legacy, pure v2, and a
// container whose cgroup mounts show a non-root subtree.
#include "sandbox/local/cgroups.h"

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace sandgate::sandbox::local
