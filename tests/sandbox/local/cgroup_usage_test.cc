// A session's usage read from fake cgroup files, as each layout has them: pure v2 (memory,
// pids and cpu.stat in one cgroup), hybrid (v1 memory and pids, cpu.stat from the v2 tracking
// cgroup without controllers), legacy v1 (cpuacct.usage), and what is missing.
#include "sandbox/local/cgroup_usage.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A v2 cgroup with the given controllers.
CgroupUsageFiles V2(const std::string& dir, bool memory, bool pids) {
  CgroupUsageFiles f;
  f.unified = dir;
  f.unified_memory = memory;
  f.unified_pids = pids;
  return f;
}

// v1 cgroups, and a v2 one without controllers (hybrid) or none (legacy: "").
CgroupUsageFiles V1(const std::string& unified, const std::string& memory, const std::string& cpu,
                    const std::string& pids) {
  CgroupUsageFiles f;
  f.unified = unified;
  f.memory_v1 = memory;
  f.cpu_v1 = cpu;
  f.pids_v1 = pids;
  return f;
}

class CgroupUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandgate-cgroup-usage-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  // A directory standing in for one cgroup, with `files` as the kernel would show them.
  std::string Cgroup(const std::string& name,
                     const std::vector<std::pair<std::string, std::string>>& files) {
    const std::string dir = root_ + "/" + name;
    EXPECT_EQ(mkdir(dir.c_str(), 0755), 0);
    for (const auto& [file, text] : files) std::ofstream(dir + "/" + file) << text;
    return dir;
  }

  std::string root_;
};

TEST_F(CgroupUsageTest, UnifiedReadsMemoryCpuAndPidsFromOneCgroup) {
  const std::string v2 = Cgroup("v2", {{"memory.current", "52428800\n"},
                                       {"memory.max", "1073741824\n"},
                                       {"pids.current", "7\n"},
                                       {"cpu.stat",
                                        "usage_usec 2500000\nuser_usec 2000000\n"
                                        "system_usec 500000\nnr_periods 0\n"}});
  ResourceUsage u = ReadCgroupUsage(V2(v2, /*memory=*/true, /*pids=*/true));
  EXPECT_EQ(u.memory_bytes, 52428800u);
  EXPECT_EQ(u.memory_limit_bytes, 1073741824u);
  EXPECT_EQ(u.cpu_time, absl::Milliseconds(2500));
  EXPECT_EQ(u.processes, 7u);
  EXPECT_THAT(u.unmeasured, IsEmpty());
}

TEST_F(CgroupUsageTest, UnifiedMemoryMaxIsNoLimit) {
  const std::string v2 = Cgroup("v2", {{"memory.current", "4096\n"}, {"memory.max", "max\n"}});
  ResourceUsage u = ReadCgroupUsage(V2(v2, /*memory=*/true, /*pids=*/false));
  EXPECT_EQ(u.memory_bytes, 4096u);
  EXPECT_EQ(u.memory_limit_bytes, 0u);
}

TEST_F(CgroupUsageTest, HybridTakesMemoryAndPidsFromV1AndCpuFromTheTrackingCgroup) {
  // The v2 tracking cgroup has no controllers: no memory.current, no pids.current, but the
  // kernel keeps cpu.stat in every v2 cgroup.
  const std::string v2 = Cgroup("v2", {{"cpu.stat", "usage_usec 1234\nuser_usec 1000\n"}});
  const std::string memory = Cgroup(
      "memory", {{"memory.usage_in_bytes", "2097152\n"}, {"memory.limit_in_bytes", "268435456\n"}});
  const std::string pids = Cgroup("pids", {{"pids.current", "3\n"}});
  ResourceUsage u = ReadCgroupUsage(V1(v2, memory, "", pids));
  EXPECT_EQ(u.memory_bytes, 2097152u);
  EXPECT_EQ(u.memory_limit_bytes, 268435456u);
  EXPECT_EQ(u.cpu_time, absl::Microseconds(1234));
  EXPECT_EQ(u.processes, 3u);
  EXPECT_THAT(u.unmeasured, IsEmpty());
}

TEST_F(CgroupUsageTest, LegacyCpuFromCpuacctAndTheHugeV1LimitIsNone) {
  const std::string memory = Cgroup("memory", {{"memory.usage_in_bytes", "8192\n"},
                                               {"memory.limit_in_bytes", "9223372036854771712\n"}});
  const std::string cpu = Cgroup("cpu", {{"cpuacct.usage", "1500000000\n"}});
  ResourceUsage u = ReadCgroupUsage(V1("", memory, cpu, ""));
  EXPECT_EQ(u.memory_bytes, 8192u);
  EXPECT_EQ(u.memory_limit_bytes, 0u);
  EXPECT_EQ(u.cpu_time, absl::Milliseconds(1500));
  EXPECT_THAT(u.unmeasured, ElementsAre(HasSubstr("processes")));
}

TEST_F(CgroupUsageTest, V2WithoutTheMemoryControllerFallsBackToV1) {
  // memory.current of a controller the cgroup does not have is not trusted even if present.
  const std::string v2 = Cgroup("v2", {{"memory.current", "1\n"}, {"cpu.stat", "usage_usec 5\n"}});
  const std::string memory = Cgroup("memory", {{"memory.usage_in_bytes", "777\n"}});
  ResourceUsage u = ReadCgroupUsage(V1(v2, memory, "", ""));
  EXPECT_EQ(u.memory_bytes, 777u);
}

TEST_F(CgroupUsageTest, MissingAndGarbledFilesAreNamedNotGuessed) {
  const std::string v2 = Cgroup("v2", {{"cpu.stat", "user_usec 10\n"},  // no usage_usec
                                       {"memory.current", "lots\n"}});
  ResourceUsage u = ReadCgroupUsage(V2(v2, /*memory=*/true, /*pids=*/true));
  EXPECT_EQ(u.memory_bytes, 0u);
  EXPECT_EQ(u.cpu_time, absl::ZeroDuration());
  EXPECT_EQ(u.processes, 0u);
  EXPECT_THAT(u.unmeasured,
              ElementsAre(HasSubstr("memory"), HasSubstr("cpu"), HasSubstr("processes")));
}

TEST_F(CgroupUsageTest, NoCgroupsAtAll) {
  ResourceUsage u = ReadCgroupUsage(CgroupUsageFiles());
  EXPECT_EQ(u.unmeasured.size(), 3u);
}

}  // namespace
}  // namespace sandgate::sandbox::local
