// What an Agents API openai_hosted environment is made from (openai-api.md §7), from the
// sandbox a run asks for: the one place SessionSpec is mapped for the `openai-agents` provider,
// and the one place that says what such an environment cannot do.
//
//   SANDGATE_RETURN_IF_ERROR(CheckAgentsSpec(spec));      // before anything is made
//   upstream::AgentEnvironmentSpec env = EnvironmentFor(spec, files, setup_commands);
//
// Mapping:
//  - memory_bytes: exactly a container size: 1 GiB small, 4 GiB medium, 16 GiB large (the sizes
//    come with 1, 2 and 4 vCPUs); anything else is refused, naming the sizes.
//  - network: disabled / restricted (1..100 exact host names: the API takes no wildcards, so a
//    "*.suffix" pattern is refused) / enabled, always sent (the beta's default is enabled).
//  - env: as given, except the names the API rejects (PATH, CODEX_*, OPENAI_API_KEY), refused.
//  - files: inline at /workspace/<path>; setup commands with cwd /workspace.
//  - max_processes, workspace_bytes/inodes, CPU limits, proxy ports and byte/connection caps,
//    file modes: not applicable there; AgentsUnenforced says so (session.created.unenforced).
//
// Thread safe (pure functions).
#ifndef SANDGATE_SANDBOX_AGENTS_AGENTS_ENVIRONMENT_H_
#define SANDGATE_SANDBOX_AGENTS_AGENTS_ENVIRONMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sandbox/sandbox.h"
#include "upstream/agents_client.h"

namespace sandgate::sandbox {

// Where an environment's files are and where its published outputs must be written.
inline constexpr char kAgentsWorkspace[] = "/workspace";
inline constexpr char kAgentsOutputs[] = "/workspace/outputs";

// A file placed in the environment when it is made; `path` is relative to /workspace.
struct EnvironmentFile {
  std::string path;
  std::string data;
};

// "small", "medium" or "large" for exactly 1, 4 or 16 GiB; INVALID_ARGUMENT naming
// sandbox.memory_bytes otherwise.
absl::StatusOr<std::string> ContainerSize(uint64_t memory_bytes);
// OK when an openai_hosted environment can be made as `spec` asks; INVALID_ARGUMENT naming the
// request field otherwise.
absl::Status CheckAgentsSpec(const SessionSpec& spec);
// The `environment` of a session create. `spec` must have passed CheckAgentsSpec.
upstream::AgentEnvironmentSpec EnvironmentFor(const SessionSpec& spec,
                                              const std::vector<EnvironmentFile>& files,
                                              const std::vector<std::string>& setup_commands);
// What such an environment does not enforce of `spec`, for session.created.
std::vector<std::string> AgentsUnenforced(const SessionSpec& spec);

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_AGENTS_AGENTS_ENVIRONMENT_H_
