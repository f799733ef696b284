#include "tests/load/leak_checks.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sandgate::load {

int LiveProcessesWithUids(uint32_t base, uint32_t count) {
  int n = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    bool zombie = false;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "State:") && absl::StrContains(line, "zombie")) zombie = true;
      if (absl::StartsWith(line, "Uid:") && !zombie) {
        std::vector<std::string> f =
            absl::StrSplit(line, absl::ByAnyChar("\t "), absl::SkipEmpty());
        uint32_t uid;
        if (f.size() > 1 && absl::SimpleAtoi(f[1], &uid) && uid >= base && uid < base + count) ++n;
      }
    }
  }
  closedir(d);
  return n;
}

std::set<std::string> SessionCgroups() {
  std::set<std::string> dirs;
  FILE* p = popen("find /sys/fs/cgroup -maxdepth 7 -type d -name 'sandgate-s*' 2>/dev/null", "r");
  char line[4096];
  while (p && fgets(line, sizeof(line), p))
    dirs.insert(std::string(absl::StripTrailingAsciiWhitespace(line)));
  if (p) pclose(p);
  return dirs;
}

int LeakedCgroups(const std::set<std::string>& sessions) {
  int leaked = 0;
  for (const std::string& dir : SessionCgroups()) {
    const std::string name = dir.substr(dir.rfind('/') + 1);
    if (sessions.count(std::string(absl::StripPrefix(name, "sandgate-"))) != 0) {
      ++leaked;
      std::fprintf(stderr, "leaked cgroup %s\n", dir.c_str());
    }
  }
  return leaked;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace sandgate::load
