#include "sandbox/agents/agents_environment.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sandgate::sandbox {
namespace {

constexpr int kMaxDomains = 100;  // restricted: 1..100 exact names (openai-api.md §7)

}  // namespace

absl::StatusOr<std::string> ContainerSize(uint64_t memory_bytes) {
  constexpr uint64_t kGiB = 1ull << 30;
  if (memory_bytes == kGiB) return std::string("small");
  if (memory_bytes == 4 * kGiB) return std::string("medium");
  if (memory_bytes == 16 * kGiB) return std::string("large");
  return absl::InvalidArgumentError(
      absl::StrCat("sandbox.memory_bytes: ", memory_bytes,
                   " is not an Agents API container size; the openai-agents provider takes exactly "
                   "1 GiB (small, 1 vCPU), 4 GiB (medium, 2 vCPUs) or 16 GiB (large, 4 vCPUs)"));
}

absl::Status CheckAgentsSpec(const SessionSpec& spec) {
  absl::StatusOr<std::string> size = ContainerSize(spec.memory_bytes);
  if (!size.ok()) return size.status();
  if (spec.network.mode == NetworkMode::kRestricted) {
    const std::vector<std::string>& domains = spec.network.allowed_domains;
    if (domains.empty() || domains.size() > kMaxDomains) {
      return absl::InvalidArgumentError(
          absl::StrCat("sandbox.network.allowed_domains: the Agents API takes 1 to ", kMaxDomains,
                       " names for a restricted network (got ", domains.size(), ")"));
    }
    for (size_t i = 0; i < domains.size(); ++i) {
      if (absl::StrContains(domains[i], '*')) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sandbox.network.allowed_domains[", i, "]: '", domains[i],
            "' is a pattern; the Agents API allows exact host names only, so name each host"));
      }
    }
  }
  for (const auto& [name, value] : spec.env) {
    if (name == "PATH" || name == "OPENAI_API_KEY" || absl::StartsWith(name, "CODEX_")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sandbox.env[", name,
          "]: the Agents API refuses PATH, OPENAI_API_KEY and CODEX_* in an environment"));
    }
  }
  return absl::OkStatus();
}

upstream::AgentEnvironmentSpec EnvironmentFor(const SessionSpec& spec,
                                              const std::vector<EnvironmentFile>& files,
                                              const std::vector<std::string>& setup_commands) {
  upstream::AgentEnvironmentSpec env;
  env.type = "openai_hosted";
  env.container_size = *ContainerSize(spec.memory_bytes);
  upstream::AgentNetwork network;
  switch (spec.network.mode) {
    case NetworkMode::kDisabled:
      network.access = "disabled";
      break;
    case NetworkMode::kRestricted:
      network.access = "restricted";
      network.allowed_domains = spec.network.allowed_domains;
      break;
    case NetworkMode::kEnabled:
      network.access = "enabled";
      break;
  }
  env.network = std::move(network);
  env.env = spec.env;
  for (const EnvironmentFile& f : files) {
    env.files.push_back({upstream::AgentFile::Kind::kInline,
                         absl::StrCat(kAgentsWorkspace, "/", f.path), f.data, ""});
  }
  for (const std::string& c : setup_commands) env.setup_commands.push_back({c, kAgentsWorkspace});
  return env;
}

std::vector<std::string> AgentsUnenforced(const SessionSpec& spec) {
  std::vector<std::string> out = {
      absl::StrCat("memory: container_size ", *ContainerSize(spec.memory_bytes),
                   " (the Agents API's own size; its CPUs come with it)"),
      "max_processes, workspace size and inodes, CPU limits: not applicable to an Agents API "
      "environment",
      "command timeouts: the Agents API's harness times its own commands",
      "file modes are not kept; setup command output is not echoed (the API keeps it "
      "confidential)",
  };
  if (spec.network.mode != NetworkMode::kDisabled) {
    out.push_back(
        "network: the environment's own egress policy applies; sandgate's proxy ports, "
        "connection and byte caps and network.decision events do not");
  }
  return out;
}

}  // namespace sandgate::sandbox
