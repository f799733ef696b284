// Tenants: who is calling, from the bearer token.
//
// Tokens are compared by their sha256 (the config holds hashes, never tokens). With no
// tenants configured every caller is the single tenant "local" (the daemon then listens
// only on a Unix socket unless told otherwise).
//
// Thread safe (immutable after construction).
#ifndef SANDGATE_CORE_TENANTS_H_
#define SANDGATE_CORE_TENANTS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config.h"

namespace sandgate::core {

struct Caller {
  std::string tenant;
  bool is_operator = false;
  // The tenant's configuration (owned by Tenants, which outlives every call); null for the
  // default local tenant, which has no policy and no quotas.
  const TenantConfig* config = nullptr;
};

class Tenants {
 public:
  explicit Tenants(std::vector<TenantConfig> tenants) : tenants_(std::move(tenants)) {}
  // `authorization` is the raw metadata value ("Bearer <token>"), or nullopt when absent.
  absl::StatusOr<Caller> Authenticate(const std::optional<std::string>& authorization) const;
  // The caller a tenant's stored work runs as (after a restart), or nullopt when no such
  // tenant is configured now.
  std::optional<Caller> Find(const std::string& name) const;

 private:
  const std::vector<TenantConfig> tenants_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_TENANTS_H_
