#include "core/sandbox_spec.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::core {
namespace {

using google::protobuf::util::TimeUtil;

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

absl::Status CheckProviderRunsCommands(const sandbox::Provider& provider,
                                       const v1::SandboxSpec& sb) {
  if (provider.runs_setup_commands() || sb.setup_commands().empty()) return absl::OkStatus();
  return errors::InvalidArgument(absl::StrCat("sandbox.setup_commands: the '", provider.name(),
                                              "' provider runs commands only through the openai "
                                              "agent; leave them out, or use provider 'local'"));
}

uint64_t MemoryBytes(const v1::SandboxSpec& sb, const Config& cfg) {
  return sb.memory_bytes() ? sb.memory_bytes() : cfg.memory_bytes;
}
uint64_t WorkspaceBytes(const v1::SandboxSpec& sb, const Config& cfg) {
  return sb.workspace_bytes() ? sb.workspace_bytes()
                              : DefaultWorkspaceBytes(cfg, MemoryBytes(sb, cfg));
}

absl::StatusOr<std::string> EffectiveIsolation(const v1::SandboxSpec& sb,
                                               const std::string& provider, const Caller& caller,
                                               const Config& cfg) {
  if (provider != "local") {
    if (sb.isolation().empty()) return std::string();
    return errors::InvalidArgument(absl::StrCat("sandbox.isolation: the '", provider,
                                                "' provider has no isolation levels; leave it "
                                                "out, or use provider 'local'"));
  }
  if (!sb.isolation().empty()) return sb.isolation();
  if (caller.config != nullptr && !caller.config->policy.default_isolation.empty()) {
    return caller.config->policy.default_isolation;
  }
  return cfg.isolation;
}

absl::Status ResolveImage(v1::SandboxSpec* sb, const std::string& provider,
                          const ImageStore* images) {
  sb->clear_image_digest();  // output only
  const std::string& name = sb->image();
  if (name.empty() || name == kHostImage) return absl::OkStatus();
  if (provider != "local") {
    return errors::InvalidArgument(absl::StrCat("sandbox.image: the '", provider,
                                                "' provider has no images; leave it out, or "
                                                "use provider 'local'"));
  }
  if (absl::Status st = ValidateImageName(name); !st.ok()) {
    return errors::InvalidArgument(absl::StrCat("sandbox.", st.message()));
  }
  if (images == nullptr) {
    return errors::FailedPrecondition("sandbox.image: images are not enabled on this daemon");
  }
  absl::StatusOr<v1::Image> image = images->Get(name);
  if (!image.ok()) {
    return absl::Status(image.status().code(),
                        absl::StrCat("sandbox.image: ", image.status().message()));
  }
  if (image->state() != v1::Image::STATE_READY) {
    return errors::FailedPrecondition(absl::StrCat(
        "sandbox.image: image '", name, "' is still being built (", image->progress(), ")"));
  }
  sb->set_image_digest(image->digest());
  return absl::OkStatus();
}

sandbox::SessionSpec ToSessionSpec(const std::string& id, const v1::SandboxSpec& sb,
                                   const Config& cfg) {
  sandbox::SessionSpec spec;
  if (!sb.image_digest().empty()) {
    spec.root_dir = ImageRootDir(ImagesDir(cfg.state_dir), sb.image_digest());
  }
  spec.id = id;
  spec.memory_bytes = MemoryBytes(sb, cfg);
  spec.max_processes = sb.max_processes() ? sb.max_processes() : cfg.max_processes;
  spec.workspace_bytes = WorkspaceBytes(sb, cfg);
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
  spec.network.allowed_domains.assign(sb.network().allowed_domains().begin(),
                                      sb.network().allowed_domains().end());
  // Validated before (ValidateSandboxSpec): anything but "gvisor" is namespaces.
  spec.isolation =
      sb.isolation() == "gvisor" ? sandbox::Isolation::kGvisor : sandbox::Isolation::kNamespaces;
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
