#include "core/sandbox_spec.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::core {
namespace {

using google::protobuf::util::TimeUtil;

std::string MiB(uint64_t bytes) { return absl::StrCat(bytes / (1 << 20), " MiB"); }

absl::Status PositiveIfSet(bool has, const google::protobuf::Duration& d, const char* field) {
  if (has && FromProto(d) <= absl::ZeroDuration()) {
    return errors::InvalidArgument(absl::StrCat(field, ": must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Nanoseconds(TimeUtil::DurationToNanoseconds(d));
}
google::protobuf::Duration ToProto(absl::Duration d) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
}
google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}
absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
}

absl::Status CheckProviderRunsCommands(const sandbox::Provider& provider, const v1::SandboxSpec& sb) {
  if (provider.runs_commands() || sb.setup_commands().empty()) return absl::OkStatus();
  return errors::InvalidArgument(absl::StrCat(
      "sandbox.setup_commands: the '", provider.name(),
      "' provider runs commands only through the openai agent; leave them out, or use provider 'local'"));
}

absl::Status ValidateSandboxSpec(const v1::SandboxSpec& sb, const Config& cfg) {
  uint64_t memory = sb.memory_bytes() ? sb.memory_bytes() : cfg.memory_bytes;
  uint64_t workspace = sb.workspace_bytes() ? sb.workspace_bytes() : cfg.workspace_bytes;
  if (memory < (16ull << 20)) return errors::InvalidArgument("sandbox.memory_bytes: at least 16 MiB");
  if (workspace >= memory) {
    return errors::InvalidArgument(absl::StrCat(
        "sandbox.workspace_bytes: must be below sandbox.memory_bytes (", MiB(memory),
        "): the workspace lives in memory"));
  }
  if (sb.max_processes() != 0 && sb.max_processes() < 8) {
    return errors::InvalidArgument("sandbox.max_processes: at least 8");
  }
  switch (sb.network().mode()) {
    case v1::NetworkPolicy::MODE_UNSPECIFIED:
    case v1::NetworkPolicy::MODE_DISABLED:
    case v1::NetworkPolicy::MODE_ENABLED:
      if (sb.network().allowed_domains_size() > 0) {
        return errors::InvalidArgument("sandbox.network.allowed_domains: only with mode RESTRICTED");
      }
      break;
    case v1::NetworkPolicy::MODE_RESTRICTED:
      if (sb.network().allowed_domains_size() == 0) {
        return errors::InvalidArgument("sandbox.network.allowed_domains: RESTRICTED needs at least one domain");
      }
      for (int i = 0; i < sb.network().allowed_domains_size(); ++i) {
        const std::string& d = sb.network().allowed_domains(i);
        absl::string_view name = absl::StartsWith(d, "*.") ? absl::string_view(d).substr(2) : d;
        if (name.empty() || name.size() > 253 ||
            name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
                absl::string_view::npos) {
          return errors::InvalidArgument(absl::StrCat("sandbox.network.allowed_domains[", i, "]: '", d,
                                                      "' is not a host name or *.suffix pattern"));
        }
      }
      break;
    default:
      return errors::InvalidArgument("sandbox.network.mode: unknown mode");
  }
  for (int i = 0; i < sb.files_size(); ++i) {
    if (sb.files(i).path().empty() || sb.files(i).path()[0] == '/') {
      return errors::InvalidArgument(absl::StrCat("sandbox.files[", i, "].path: must be relative to the workspace"));
    }
  }
  for (const auto& [name, value] : sb.env()) {
    if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos) {
      return errors::InvalidArgument(absl::StrCat("sandbox.env: '", name, "' is not a variable name"));
    }
  }
  if (auto st = PositiveIfSet(sb.has_command_timeout(), sb.command_timeout(), "sandbox.command_timeout"); !st.ok()) return st;
  if (auto st = PositiveIfSet(sb.has_idle_timeout(), sb.idle_timeout(), "sandbox.idle_timeout"); !st.ok()) return st;
  if (auto st = PositiveIfSet(sb.has_max_lifetime(), sb.max_lifetime(), "sandbox.max_lifetime"); !st.ok()) return st;
  if (MaxLifetime(sb, cfg) > cfg.session_max_lifetime_limit) {
    return errors::InvalidArgument(absl::StrCat("sandbox.max_lifetime: at most ",
                                                absl::FormatDuration(cfg.session_max_lifetime_limit)));
  }
  if (IdleTimeout(sb, cfg) > MaxLifetime(sb, cfg)) {
    return errors::InvalidArgument("sandbox.idle_timeout: longer than sandbox.max_lifetime");
  }
  return absl::OkStatus();
}

sandbox::SessionSpec ToSessionSpec(const std::string& id, const v1::SandboxSpec& sb,
                                   const Config& cfg) {
  sandbox::SessionSpec spec;
  spec.id = id;
  spec.memory_bytes = sb.memory_bytes() ? sb.memory_bytes() : cfg.memory_bytes;
  spec.max_processes = sb.max_processes() ? sb.max_processes() : cfg.max_processes;
  spec.workspace_bytes = sb.workspace_bytes() ? sb.workspace_bytes() : cfg.workspace_bytes;
  spec.env.insert(sb.env().begin(), sb.env().end());
  switch (sb.network().mode()) {
    case v1::NetworkPolicy::MODE_RESTRICTED:
      spec.network.mode = sandbox::NetworkMode::kRestricted;
      break;
    case v1::NetworkPolicy::MODE_ENABLED:
      spec.network.mode = sandbox::NetworkMode::kEnabled;
      break;
    default:
      spec.network.mode = sandbox::NetworkMode::kDisabled;
  }
  spec.network.allowed_domains.assign(sb.network().allowed_domains().begin(), sb.network().allowed_domains().end());
  return spec;
}

absl::Duration CommandTimeout(const v1::SandboxSpec& sb, const Config& cfg) {
  return sb.has_command_timeout() ? FromProto(sb.command_timeout()) : cfg.command_timeout;
}
absl::Duration IdleTimeout(const v1::SandboxSpec& sb, const Config& cfg) {
  return sb.has_idle_timeout() ? FromProto(sb.idle_timeout()) : cfg.session_idle_timeout;
}
absl::Duration MaxLifetime(const v1::SandboxSpec& sb, const Config& cfg) {
  return sb.has_max_lifetime() ? FromProto(sb.max_lifetime()) : cfg.session_max_lifetime;
}

}  // namespace sandgate::core
