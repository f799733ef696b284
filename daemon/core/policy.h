// Tenant policy: what a tenant may ask for (providers, agents, models, network modes and
// domains, memory, run time). Checked before anything is queued or created.
#ifndef SANDGATE_CORE_POLICY_H_
#define SANDGATE_CORE_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "core/tenants.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

struct PolicyRequest {
  std::string provider;
  std::string agent;  // empty for sessions
  std::string model;
  const v1::SandboxSpec* sandbox = nullptr;        // isolation resolved (EffectiveIsolation)
  absl::Duration run_time = absl::ZeroDuration();  // the run's timeout; zero for sessions
};

// PERMISSION_DENIED naming the tenant, the rule and what is allowed.
absl::Status CheckPolicy(const Caller& caller, const PolicyRequest& request, const Config& config);

// True when `domain` is allowed by `patterns` (exact names, or "*.suffix" for any subdomain).
bool DomainAllowed(const std::string& domain, const std::vector<std::string>& patterns);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_POLICY_H_
