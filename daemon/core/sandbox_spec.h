// The API's SandboxSpec turned into the provider's SessionSpec, with the
// daemon's defaults. One place, so runs and sessions get exactly the same
// sandbox (its validation: core/request_validation.h).
#ifndef SANDGATE_CORE_SANDBOX_SPEC_H_
#define SANDGATE_CORE_SANDBOX_SPEC_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "core/images.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

// INVALID_ARGUMENT when `spec` needs commands run (setup_commands) and `provider` runs none
// (Provider::runs_commands), before anything is made.
absl::Status CheckProviderRunsCommands(const sandbox::Provider& provider,
                                       const v1::SandboxSpec& spec);
// The sandbox's memory and workspace caps: the request's, or the config's defaults where it
// left a field 0 (the workspace's derived from the memory: DefaultWorkspaceBytes).
uint64_t MemoryBytes(const v1::SandboxSpec& spec, const Config& config);
uint64_t WorkspaceBytes(const v1::SandboxSpec& spec, const Config& config);
// The isolation level a request's sandbox gets on `provider`: its own, else the tenant's
// default, else the daemon's (local.isolation). "" for providers without levels (openai),
// where naming one is INVALID_ARGUMENT. Whether the tenant may have it: CheckPolicy.
absl::StatusOr<std::string> EffectiveIsolation(const v1::SandboxSpec& spec,
                                               const std::string& provider, const Caller& caller,
                                               const Config& config);
// Resolves the request's image (`spec->image`: "" or "host", or a name) for `provider`:
// sets spec->image_digest to the built image's digest (clears it for the host's root).
// INVALID_ARGUMENT for a bad name or an image on a provider without images, NOT_FOUND for an
// unknown name, FAILED_PRECONDITION while it is being built or when `images` is null (not
// enabled). Whether the tenant may use it: CheckPolicy.
absl::Status ResolveImage(v1::SandboxSpec* spec, const std::string& provider,
                          const ImageStore* images);
// With the config's defaults where the request left a field 0; `spec.isolation` resolved
// already (EffectiveIsolation; "" is namespaces).
sandbox::SessionSpec ToSessionSpec(const std::string& id, const v1::SandboxSpec& spec,
                                   const Config& config);
absl::Duration CommandTimeout(const v1::SandboxSpec& spec, const Config& config);
absl::Duration IdleTimeout(const v1::SandboxSpec& spec, const Config& config);
absl::Duration MaxLifetime(const v1::SandboxSpec& spec, const Config& config);

absl::Duration FromProto(const google::protobuf::Duration& d);
google::protobuf::Duration ToProto(absl::Duration d);
google::protobuf::Timestamp ToProto(absl::Time t);
absl::Time FromProto(const google::protobuf::Timestamp& t);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_SANDBOX_SPEC_H_
