#include "store/state_dir_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace sandgate::store {
namespace {

// The descriptors of this process open on `path`.
std::vector<int> FdsOn(const std::string& path) {
  std::vector<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    char target[PATH_MAX] = {0};
    ssize_t n = readlink(entry.path().c_str(), target, sizeof(target) - 1);
    if (n > 0 && std::string(target, n) == path) fds.push_back(std::stoi(entry.path().filename()));
  }
  return fds;
}

TEST(StateDirLockTest, ASecondHolderIsRefusedNamingTheDirectoryAndTheHoldersPid) {
  testing::ScopedTempDir dir("sg-lock");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::unique_ptr<StateDirLock>> first = StateDirLock::Acquire(dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  // flock belongs to the open file: a second open in this process contends as another
  // daemon's would.
  absl::StatusOr<std::unique_ptr<StateDirLock>> second = StateDirLock::Acquire(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            absl::StrCat("state_dir ", dir.path(), " is in use by another sandgated (pid ",
                         getpid(), ", holding ", dir.path(),
                         "/lock); stop it first, or give this daemon a state_dir of its own"));
  // Released with its holder: the next daemon takes it.
  first->reset();
  absl::StatusOr<std::unique_ptr<StateDirLock>> third = StateDirLock::Acquire(dir.path());
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(StateDirLockTest, TheLockIsNotInheritedAcrossExec) {
  testing::ScopedTempDir dir("sg-lock");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::unique_ptr<StateDirLock>> lock = StateDirLock::Acquire(dir.path());
  ASSERT_TRUE(lock.ok()) << lock.status();
  std::vector<int> fds = FdsOn((*lock)->path());
  ASSERT_EQ(fds.size(), 1u);
  EXPECT_TRUE(fcntl(fds[0], F_GETFD) & FD_CLOEXEC) << "a sandbox would keep the daemon's lock";
}

TEST(StateDirLockTest, AMissingDirectoryIsAnErrorNamingTheFile) {
  testing::ScopedTempDir dir("sg-lock");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::unique_ptr<StateDirLock>> lock =
      StateDirLock::Acquire(dir.path() + "/missing");
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find(dir.path() + "/missing/lock"), std::string::npos)
      << lock.status();
}

}  // namespace
}  // namespace sandgate::store
