#include "server/rpc_policy.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::server {

absl::Status Authorize(const RpcPolicy& policy, const core::Caller& caller) {
  if (policy.auth == Auth::kOperator && !caller.is_operator) {
    return errors::PermissionDenied(std::string(policy.name) + ": the operator role is required");
  }
  return absl::OkStatus();
}

}  // namespace sandgate::server
