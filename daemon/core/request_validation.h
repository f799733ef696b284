// Request validation: every field of every request the core reads, checked
// before anything is queued, stored or created.
//
// Each check returns INVALID_ARGUMENT naming the field and the limit, e.g.
// "sandbox.memory_bytes: at most 64 GiB (daemon ceiling)" or "labels: at most
// 64 entries". The daemon's ceilings (Config::limits, the machine's) apply to
// every caller, with or without a tenant policy; a tenant's policy
// (core/policy.h) may only narrow them. What needs the daemon's state (is the
// playbook known, is the session live) is checked by the managers.
//
//   SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, config));
//
// Thread safe (pure functions).
#ifndef SANDGATE_CORE_REQUEST_VALIDATION_H_
#define SANDGATE_CORE_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/config.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

// Bounds on what one request may carry, independent of the machine.
struct RequestBounds {
  static constexpr size_t kId = 128;    // run_id, session_id
  static constexpr size_t kName = 128;  // playbook, provider, agent, model
  static constexpr size_t kIdempotencyKey = 256;
  static constexpr size_t kReason = 1024;  // CancelRun, CloseSession
  static constexpr int kLabels = 64;
  static constexpr size_t kLabelKey = 128;
  static constexpr size_t kLabelValue = 1024;
  static constexpr int kEnv = 256;
  static constexpr size_t kEnvName = 256;
  static constexpr size_t kEnvValue = 32 << 10;
  static constexpr int kDomains = 64;
  static constexpr int kFiles = 256;     // sandbox.files
  static constexpr size_t kPath = 4096;  // a workspace path
  static constexpr size_t kPathComponent = 255;
  static constexpr int kSetupCommands = 32;
  static constexpr size_t kCommand = 64 << 10;  // one setup command, one Exec command
  static constexpr int kArgv = 1024;
  static constexpr size_t kArgvBytes = 1 << 20;  // all of one argv together
  static constexpr int kInputs = 64;
  static constexpr uint32_t kMaxTurns = 1000;
  static constexpr uint64_t kOutputCapBytes = 64ull << 20;  // Exec output_cap_bytes
};

// "64 GiB", "16 MiB", "512 KiB", "100 bytes": limits as a person reads them.
std::string FormatBytes(uint64_t bytes);

// A relative workspace path: no "..", ".", empty or over-long components, no
// NUL, no leading or trailing "/". `field` names it in the error.
absl::Status ValidateWorkspacePath(absl::string_view path, absl::string_view field);
// An id a caller names (run_id, session_id): required, bounded, printable
// ASCII.
absl::Status ValidateId(absl::string_view id, absl::string_view field);
absl::Status ValidateIdempotencyKey(absl::string_view key);
absl::Status ValidateReason(absl::string_view reason);
absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels);

// The sandbox a run or session asks for, against the daemon's ceilings
// (Config::limits).
absl::Status ValidateSandboxSpec(const v1::SandboxSpec& spec, const Config& config);
// Every field of RunAnalysis (inputs, sandbox, run_timeout, max_turns, names,
// labels, key).
absl::Status ValidateRunRequest(const v1::RunAnalysisRequest& request, const Config& config);
absl::Status ValidateCreateSessionRequest(const v1::CreateSessionRequest& request,
                                          const Config& config);
// Exec: session_id, exactly one of argv and command, env, cwd, timeout,
// output_cap_bytes.
absl::Status ValidateExecRequest(const v1::ExecRequest& request, const Config& config);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_REQUEST_VALIDATION_H_
