#include "sandbox/local/cgroup_usage.h"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sandgate::sandbox::local {
namespace {

// v1 reports "no limit" as the largest page-aligned value; anything at or above this is none.
constexpr uint64_t kV1NoLimit = uint64_t{1} << 62;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A file holding one number ("1234\n"); nullopt when absent or not a number ("max").
std::optional<uint64_t> Number(const std::string& dir, const char* name) {
  if (dir.empty()) return std::nullopt;
  std::optional<std::string> text = ReadFile(dir + "/" + name);
  uint64_t v = 0;
  if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) return std::nullopt;
  return v;
}

// The value of `key` in a "key value" per line file (cpu.stat).
std::optional<uint64_t> Keyed(const std::string& dir, const char* name, absl::string_view key) {
  if (dir.empty()) return std::nullopt;
  std::optional<std::string> text = ReadFile(dir + "/" + name);
  if (!text) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) continue;
    uint64_t v = 0;
    if (absl::SimpleAtoi(line, &v)) return v;
  }
  return std::nullopt;
}

}  // namespace

ResourceUsage ReadCgroupUsage(const CgroupUsageFiles& files) {
  ResourceUsage u;
  const std::string v2_memory = files.unified_memory ? files.unified : "";
  if (std::optional<uint64_t> current = Number(v2_memory, "memory.current")) {
    u.memory_bytes = *current;
    u.memory_limit_bytes = Number(v2_memory, "memory.max").value_or(0);  // "max": none
  } else if (std::optional<uint64_t> usage = Number(files.memory_v1, "memory.usage_in_bytes")) {
    u.memory_bytes = *usage;
    const uint64_t limit = Number(files.memory_v1, "memory.limit_in_bytes").value_or(0);
    u.memory_limit_bytes = limit >= kV1NoLimit ? 0 : limit;
  } else {
    u.unmeasured.push_back("memory: the session has no memory cgroup");
  }

  if (std::optional<uint64_t> usec = Keyed(files.unified, "cpu.stat", "usage_usec")) {
    u.cpu_time = absl::Microseconds(*usec);
  } else if (std::optional<uint64_t> nsec = Number(files.cpu_v1, "cpuacct.usage")) {
    u.cpu_time = absl::Nanoseconds(*nsec);
  } else {
    u.unmeasured.push_back("cpu: the session has no cgroup that accounts CPU time");
  }

  const std::string v2_pids = files.unified_pids ? files.unified : "";
  if (std::optional<uint64_t> n = Number(v2_pids, "pids.current")) {
    u.processes = *n;
  } else if (std::optional<uint64_t> m = Number(files.pids_v1, "pids.current")) {
    u.processes = *m;
  } else {
    u.unmeasured.push_back("processes: the session has no pids cgroup");
  }
  return u;
}

}  // namespace sandgate::sandbox::local
