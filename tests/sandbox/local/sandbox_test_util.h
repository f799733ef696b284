// Helpers shared by the tests that run real local sandboxes (tests/sandbox/local and
// tests/security): what runs as a uid on the host, which cgroup directories exist, and the
// removal of a test cgroup parent at the end of a test binary.
//
// Thread compatible (plain functions over /proc and /sys).
#ifndef SANDGATE_TESTS_SANDBOX_LOCAL_SANDBOX_TEST_UTIL_H_
#define SANDGATE_TESTS_SANDBOX_LOCAL_SANDBOX_TEST_UTIL_H_

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cancel.h"
#include "gtest/gtest.h"
#include "sandbox/local/cgroups.h"
#include "sandbox/sandbox.h"

namespace sandgate::testing {

// One command's result and output.
struct Output {
  sandbox::ExecResult result;
  std::string out;
  std::string err;
};

// Runs one command to completion, collecting its output; a failed Exec fails the test.
inline Output RunCommand(sandbox::Session* s, std::vector<std::string> argv,
                         sandbox::ExecRequest req = {}, const CancelToken* cancel = nullptr) {
  req.argv = std::move(argv);
  Output run;
  auto r = s->Exec(
      req,
      [&](sandbox::OutputStream st, absl::string_view chunk) {
        (st == sandbox::OutputStream::kStdout ? run.out : run.err)
            .append(chunk.data(), chunk.size());
      },
      cancel);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) run.result = *r;
  return run;
}

// Host pids of live (non-zombie) processes running as `uid` (real/effective/saved/fs).
inline std::vector<pid_t> HostProcessesOf(uid_t uid) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  while (struct dirent* e = readdir(d)) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    bool zombie = false;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "State:") && absl::StrContains(line, "Z")) zombie = true;
      if (!absl::StartsWith(line, "Uid:")) continue;
      std::vector<std::string> f = absl::StrSplit(line.substr(4), '\t', absl::SkipEmpty());
      for (const std::string& u : f) {
        if (static_cast<uid_t>(atoi(u.c_str())) == uid && !zombie) {
          out.push_back(pid);
          break;
        }
      }
      break;
    }
  }
  closedir(d);
  return out;
}

// Pids listed in the cgroup.procs of `dirs` (cgroup directories).
inline std::vector<pid_t> ProcessesInCgroups(const std::vector<std::string>& dirs) {
  std::vector<pid_t> out;
  for (const std::string& dir : dirs) {
    std::ifstream in(dir + "/cgroup.procs");
    pid_t pid;
    while (in >> pid) out.push_back(pid);
  }
  return out;
}

// Every directory named `name` below `dir` (depth-limited walk).
inline void FindDirs(const std::string& dir, const std::string& name, int depth,
                     std::vector<std::string>* out) {
  if (depth > 6) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    std::string path = absl::StrCat(dir, "/", e->d_name);
    if (name == e->d_name) out->push_back(path);
    FindDirs(path, name, depth + 1, out);
  }
  closedir(d);
}

// A stand-in for /dev/kvm (BwrapOptions::kvm_device): a temporary file that opens for reading
// and writing, removed at the end of the scope.
class FakeKvmDevice {
 public:
  FakeKvmDevice() {
    char tmpl[] = "/tmp/sg-fake-kvm-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    path_ = tmpl;
  }
  ~FakeKvmDevice() { unlink(path_.c_str()); }
  FakeKvmDevice(const FakeKvmDevice&) = delete;
  FakeKvmDevice& operator=(const FakeKvmDevice&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Removes a test cgroup parent once no test process uses it (rmdir fails while any session
// cgroup of a parallel test process is still inside, which is fine).
class CgroupParentCleanup : public ::testing::Environment {
 public:
  explicit CgroupParentCleanup(std::string parent) : parent_(std::move(parent)) {}
  void TearDown() override {
    absl::StatusOr<sandbox::local::CgroupHost> host = sandbox::local::DetectCgroups(parent_);
    if (!host.ok()) return;
    for (const std::string* dir :
         {&host->memory_v1, &host->pids_v1, &host->freezer_v1, &host->cpu_v1, &host->unified}) {
      if (!dir->empty()) rmdir(dir->c_str());
    }
  }

 private:
  const std::string parent_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_SANDBOX_LOCAL_SANDBOX_TEST_UTIL_H_
