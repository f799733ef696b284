#include "core/request_validation.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

using Bounds = RequestBounds;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return errors::InvalidArgument(absl::StrCat(field, ": ", what));
}

absl::Status AtMostChars(absl::string_view field, absl::string_view value, size_t max) {
  if (value.size() <= max) return absl::OkStatus();
  return Invalid(field, absl::StrCat("at most ", max, " bytes (got ", value.size(), ")"));
}

template <typename Repeated>
absl::Status AtMostEntries(absl::string_view field, const Repeated& r, int max) {
  if (static_cast<int>(r.size()) <= max) return absl::OkStatus();
  return Invalid(field, absl::StrCat("at most ", max, " entries (got ", r.size(), ")"));
}

bool HasNul(absl::string_view s) { return s.find('\0') != absl::string_view::npos; }

bool PrintableAscii(absl::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

absl::Status Name(absl::string_view field, absl::string_view value) {
  SANDGATE_RETURN_IF_ERROR(AtMostChars(field, value, Bounds::kName));
  if (!PrintableAscii(value)) return Invalid(field, "printable ASCII without spaces only");
  return absl::OkStatus();
}

absl::Status Duration(absl::string_view field, bool has, const google::protobuf::Duration& d,
                      absl::Duration ceiling, absl::string_view ceiling_key) {
  if (!has) return absl::OkStatus();
  // Not FromProto: protobuf's conversion overflows (to a negative) on seconds
  // that are valid on the wire; absl::Duration holds any int64 of seconds.
  absl::Duration v = absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  if (v <= absl::ZeroDuration()) return Invalid(field, "must be positive");
  if (v > ceiling) {
    return Invalid(field, absl::StrCat("at most ", absl::FormatDuration(ceiling),
                                       " (daemon ceiling ", ceiling_key, ")"));
  }
  return absl::OkStatus();
}

absl::Status Env(absl::string_view field,
                 const google::protobuf::Map<std::string, std::string>& env) {
  SANDGATE_RETURN_IF_ERROR(AtMostEntries(field, env, Bounds::kEnv));
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos) {
      return Invalid(field, absl::StrCat("'", name, "' is not a variable name"));
    }
    SANDGATE_RETURN_IF_ERROR(AtMostChars(absl::StrCat(field, "[", name.substr(0, 64), "] name"),
                                         name, Bounds::kEnvName));
    SANDGATE_RETURN_IF_ERROR(
        AtMostChars(absl::StrCat(field, "[", name, "]"), value, Bounds::kEnvValue));
    if (HasNul(value)) return Invalid(absl::StrCat(field, "[", name, "]"), "contains a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status Command(absl::string_view field, absl::string_view command) {
  SANDGATE_RETURN_IF_ERROR(AtMostChars(field, command, Bounds::kCommand));
  if (HasNul(command)) return Invalid(field, "contains a NUL byte");
  return absl::OkStatus();
}

absl::Status Network(const v1::NetworkPolicy& net) {
  SANDGATE_RETURN_IF_ERROR(
      AtMostEntries("sandbox.network.allowed_domains", net.allowed_domains(), Bounds::kDomains));
  switch (net.mode()) {
    case v1::NetworkPolicy::MODE_UNSPECIFIED:
    case v1::NetworkPolicy::MODE_DISABLED:
    case v1::NetworkPolicy::MODE_ENABLED:
      if (net.allowed_domains_size() > 0) {
        return errors::InvalidArgument(
            "sandbox.network.allowed_domains: only with mode RESTRICTED");
      }
      return absl::OkStatus();
    case v1::NetworkPolicy::MODE_RESTRICTED:
      break;
    default:
      return errors::InvalidArgument("sandbox.network.mode: unknown mode");
  }
  if (net.allowed_domains_size() == 0) {
    return errors::InvalidArgument(
        "sandbox.network.allowed_domains: RESTRICTED needs at least one "
        "domain");
  }
  for (int i = 0; i < net.allowed_domains_size(); ++i) {
    const std::string& d = net.allowed_domains(i);
    absl::string_view name = absl::StartsWith(d, "*.") ? absl::string_view(d).substr(2) : d;
    if (name.empty() || name.size() > 253 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                               "VWXYZ0123456789.-") != absl::string_view::npos) {
      return errors::InvalidArgument(
          absl::StrCat("sandbox.network.allowed_domains[", i, "]: '", d.substr(0, 300),
                       "' is not a host name (at most 253 bytes) or *.suffix pattern"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  struct Unit {
    int shift;
    const char* name;
  };
  for (const Unit& u : {Unit{40, "TiB"}, Unit{30, "GiB"}, Unit{20, "MiB"}, Unit{10, "KiB"}}) {
    if (bytes >= (1ull << u.shift) && bytes % (1ull << u.shift) == 0)
      return absl::StrCat(bytes >> u.shift, " ", u.name);
  }
  return absl::StrCat(bytes, " bytes");
}

absl::Status ValidateWorkspacePath(absl::string_view path, absl::string_view field) {
  if (path.empty()) return Invalid(field, "required");
  SANDGATE_RETURN_IF_ERROR(AtMostChars(field, path, Bounds::kPath));
  if (HasNul(path)) return Invalid(field, "contains a NUL byte");
  if (path.front() == '/')
    return Invalid(field, absl::StrCat("'", path, "' must be relative to the workspace"));
  if (path.back() == '/')
    return Invalid(field, absl::StrCat("'", path, "' names a directory, not a file"));
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Invalid(field, absl::StrCat("'", path,
                                         "' must stay inside the workspace (no "
                                         "'..', '.' or empty parts)"));
    }
    if (part.size() > Bounds::kPathComponent) {
      return Invalid(
          field, absl::StrCat("a path component is at most ", Bounds::kPathComponent, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateId(absl::string_view id, absl::string_view field) {
  if (id.empty()) return Invalid(field, "required");
  SANDGATE_RETURN_IF_ERROR(AtMostChars(field, id, Bounds::kId));
  if (!PrintableAscii(id)) return Invalid(field, "printable ASCII without spaces only");
  return absl::OkStatus();
}

absl::Status ValidateIdempotencyKey(absl::string_view key) {
  SANDGATE_RETURN_IF_ERROR(AtMostChars("idempotency_key", key, Bounds::kIdempotencyKey));
  if (!PrintableAscii(key))
    return Invalid("idempotency_key", "printable ASCII without spaces only");
  return absl::OkStatus();
}

absl::Status ValidateReason(absl::string_view reason) {
  SANDGATE_RETURN_IF_ERROR(AtMostChars("reason", reason, Bounds::kReason));
  if (HasNul(reason)) return Invalid("reason", "contains a NUL byte");
  return absl::OkStatus();
}

absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  SANDGATE_RETURN_IF_ERROR(AtMostEntries("labels", labels, Bounds::kLabels));
  for (const auto& [key, value] : labels) {
    if (key.empty()) return Invalid("labels", "a key is empty");
    SANDGATE_RETURN_IF_ERROR(AtMostChars("labels key", key, Bounds::kLabelKey));
    SANDGATE_RETURN_IF_ERROR(
        AtMostChars(absl::StrCat("labels[", key, "]"), value, Bounds::kLabelValue));
    if (HasNul(key) || HasNul(value))
      return Invalid(absl::StrCat("labels[", key, "]"), "contains a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status ValidateSandboxSpec(const v1::SandboxSpec& sb, const Config& cfg) {
  if (!sb.isolation().empty()) {
    absl::StatusOr<sandbox::Isolation> level = sandbox::ParseIsolation(sb.isolation());
    if (!level.ok()) {
      return errors::InvalidArgument(absl::StrCat("sandbox.", level.status().message()));
    }
  }
  const MachineLimits& max = cfg.limits;
  const uint64_t memory = MemoryBytes(sb, cfg);
  const uint64_t workspace = WorkspaceBytes(sb, cfg);
  if (memory < (16ull << 20))
    return errors::InvalidArgument("sandbox.memory_bytes: at least 16 MiB");
  if (memory > max.memory_bytes) {
    return Invalid("sandbox.memory_bytes", absl::StrCat("at most ", FormatBytes(max.memory_bytes),
                                                        " (daemon ceiling limits.memory_bytes)"));
  }
  if (workspace < (1ull << 20))
    return errors::InvalidArgument("sandbox.workspace_bytes: at least 1 MiB");
  if (workspace > max.workspace_bytes) {
    return Invalid("sandbox.workspace_bytes",
                   absl::StrCat("at most ", FormatBytes(max.workspace_bytes),
                                " (daemon ceiling limits.workspace_bytes)"));
  }
  if (workspace >= memory) {
    return Invalid("sandbox.workspace_bytes",
                   absl::StrCat(FormatBytes(workspace), " must be below sandbox.memory_bytes (",
                                FormatBytes(memory),
                                "): the workspace lives in memory; leave it 0 for a quarter of "
                                "the memory"));
  }
  if (sb.max_processes() != 0 && sb.max_processes() < 8) {
    return errors::InvalidArgument("sandbox.max_processes: at least 8");
  }
  if (sb.max_processes() > max.max_processes) {
    return Invalid("sandbox.max_processes", absl::StrCat("at most ", max.max_processes,
                                                         " (daemon ceiling limits.max_processes)"));
  }
  SANDGATE_RETURN_IF_ERROR(Network(sb.network()));

  SANDGATE_RETURN_IF_ERROR(AtMostEntries("sandbox.files", sb.files(), Bounds::kFiles));
  std::set<absl::string_view> paths;
  uint64_t file_bytes = 0;
  for (int i = 0; i < sb.files_size(); ++i) {
    const v1::InlineFile& f = sb.files(i);
    std::string field = absl::StrCat("sandbox.files[", i, "].path");
    SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(f.path(), field));
    if (!paths.insert(f.path()).second)
      return Invalid(field, absl::StrCat("duplicate path '", f.path(), "'"));
    if (f.mode() & ~0777u) {
      return Invalid(absl::StrCat("sandbox.files[", i, "].mode"),
                     "permission bits only (at most 0777)");
    }
    file_bytes += f.content().size();
  }
  // The files are placed in the workspace, which must hold them.
  const uint64_t file_cap = std::min<uint64_t>(workspace, cfg.max_input_bytes);
  if (file_bytes > file_cap) {
    return Invalid("sandbox.files",
                   absl::StrCat(file_bytes, " bytes in total, above the ", FormatBytes(file_cap),
                                " limit (the workspace and max_input_bytes)"));
  }
  SANDGATE_RETURN_IF_ERROR(Env("sandbox.env", sb.env()));
  SANDGATE_RETURN_IF_ERROR(
      AtMostEntries("sandbox.setup_commands", sb.setup_commands(), Bounds::kSetupCommands));
  for (int i = 0; i < sb.setup_commands_size(); ++i) {
    SANDGATE_RETURN_IF_ERROR(
        Command(absl::StrCat("sandbox.setup_commands[", i, "]"), sb.setup_commands(i)));
  }
  SANDGATE_RETURN_IF_ERROR(Duration("sandbox.command_timeout", sb.has_command_timeout(),
                                    sb.command_timeout(), max.command_timeout,
                                    "limits.command_timeout_seconds"));
  SANDGATE_RETURN_IF_ERROR(Duration("sandbox.idle_timeout", sb.has_idle_timeout(),
                                    sb.idle_timeout(), cfg.session_max_lifetime_limit,
                                    "defaults.session_max_lifetime_limit_seconds"));
  SANDGATE_RETURN_IF_ERROR(Duration("sandbox.max_lifetime", sb.has_max_lifetime(),
                                    sb.max_lifetime(), cfg.session_max_lifetime_limit,
                                    "defaults.session_max_lifetime_limit_seconds"));
  if (MaxLifetime(sb, cfg) > cfg.session_max_lifetime_limit) {
    return errors::InvalidArgument(absl::StrCat(
        "sandbox.max_lifetime: at most ", absl::FormatDuration(cfg.session_max_lifetime_limit)));
  }
  if (IdleTimeout(sb, cfg) > MaxLifetime(sb, cfg)) {
    return errors::InvalidArgument("sandbox.idle_timeout: longer than sandbox.max_lifetime");
  }
  return absl::OkStatus();
}

absl::Status ValidateRunRequest(const v1::RunAnalysisRequest& req, const Config& cfg) {
  SANDGATE_RETURN_IF_ERROR(Name("playbook", req.playbook()));
  SANDGATE_RETURN_IF_ERROR(Name("provider", req.provider()));
  SANDGATE_RETURN_IF_ERROR(Name("agent", req.agent()));
  SANDGATE_RETURN_IF_ERROR(Name("model", req.model()));
  if (!req.session_id().empty())
    SANDGATE_RETURN_IF_ERROR(ValidateId(req.session_id(), "session_id"));
  SANDGATE_RETURN_IF_ERROR(ValidateIdempotencyKey(req.idempotency_key()));
  SANDGATE_RETURN_IF_ERROR(ValidateLabels(req.labels()));
  SANDGATE_RETURN_IF_ERROR(AtMostEntries("inputs", req.inputs(), Bounds::kInputs));
  SANDGATE_RETURN_IF_ERROR(Duration("run_timeout", req.has_run_timeout(), req.run_timeout(),
                                    cfg.limits.run_timeout, "limits.run_timeout_seconds"));
  if (req.max_turns() > Bounds::kMaxTurns) {
    return Invalid("max_turns", absl::StrCat("at most ", Bounds::kMaxTurns));
  }
  return ValidateSandboxSpec(req.sandbox(), cfg);
}

absl::Status ValidateCreateSessionRequest(const v1::CreateSessionRequest& req, const Config& cfg) {
  SANDGATE_RETURN_IF_ERROR(Name("provider", req.provider()));
  SANDGATE_RETURN_IF_ERROR(ValidateIdempotencyKey(req.idempotency_key()));
  SANDGATE_RETURN_IF_ERROR(ValidateLabels(req.labels()));
  return ValidateSandboxSpec(req.sandbox(), cfg);
}

absl::Status ValidateExecRequest(const v1::ExecRequest& req, const Config& cfg) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(req.session_id(), "session_id"));
  if (req.argv().empty() == req.command().empty())
    return errors::InvalidArgument("argv, command: give exactly one");
  SANDGATE_RETURN_IF_ERROR(AtMostEntries("argv", req.argv(), Bounds::kArgv));
  size_t argv_bytes = 0;
  for (int i = 0; i < req.argv_size(); ++i) {
    if (HasNul(req.argv(i))) return Invalid(absl::StrCat("argv[", i, "]"), "contains a NUL byte");
    argv_bytes += req.argv(i).size() + 1;
  }
  if (argv_bytes > Bounds::kArgvBytes) {
    return Invalid("argv", absl::StrCat("at most ", FormatBytes(Bounds::kArgvBytes), " in total"));
  }
  SANDGATE_RETURN_IF_ERROR(Command("command", req.command()));
  SANDGATE_RETURN_IF_ERROR(Env("env", req.env()));
  // A directory: "." (the workspace itself) and a trailing "/" are fine there.
  absl::string_view cwd = absl::StripSuffix(req.cwd(), "/");
  if (!cwd.empty() && cwd != ".") SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(cwd, "cwd"));
  SANDGATE_RETURN_IF_ERROR(Duration("timeout", req.has_timeout(), req.timeout(),
                                    cfg.limits.command_timeout, "limits.command_timeout_seconds"));
  if (req.output_cap_bytes() > Bounds::kOutputCapBytes) {
    return Invalid("output_cap_bytes",
                   absl::StrCat("at most ", FormatBytes(Bounds::kOutputCapBytes)));
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
