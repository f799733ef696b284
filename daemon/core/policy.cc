#include "core/policy.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"

namespace sandgate::core {
namespace {

absl::Status Denied(const Caller& caller, absl::string_view what) {
  return errors::PermissionDenied(absl::StrCat("policy of tenant ", caller.tenant, ": ", what));
}

absl::Status CheckList(const Caller& caller, const char* kind, const std::string& value,
                       const std::vector<std::string>& allowed) {
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) {
    return absl::OkStatus();
  }
  return Denied(caller, absl::StrCat(kind, " '", value, "' is not allowed (allowed: ",
                                     absl::StrJoin(allowed, ", "), ")"));
}

std::string ModeName(v1::NetworkPolicy::Mode m) {
  switch (m) {
    case v1::NetworkPolicy::MODE_RESTRICTED:
      return "restricted";
    case v1::NetworkPolicy::MODE_ENABLED:
      return "enabled";
    default:
      return "disabled";
  }
}

}  // namespace

bool DomainAllowed(const std::string& domain, const std::vector<std::string>& patterns) {
  std::string d = absl::AsciiStrToLower(domain);
  for (const std::string& raw : patterns) {
    std::string p = absl::AsciiStrToLower(raw);
    if (p == d) return true;
    // "*.example.com" allows "a.example.com" and "*.a.example.com", not "example.com".
    if (absl::StartsWith(p, "*.") && absl::EndsWith(d, p.substr(1)) && d.size() > p.size() - 1)
      return true;
  }
  return false;
}

absl::Status CheckPolicy(const Caller& caller, const PolicyRequest& req, const Config& config) {
  if (caller.config == nullptr) return absl::OkStatus();
  const TenantPolicy& p = caller.config->policy;
  if (auto st = CheckList(caller, "provider", req.provider, p.providers); !st.ok()) return st;
  if (!req.agent.empty()) {
    if (auto st = CheckList(caller, "agent", req.agent, p.agents); !st.ok()) return st;
  }
  if (!req.model.empty()) {
    if (auto st = CheckList(caller, "model", req.model, p.models); !st.ok()) return st;
  }
  if (req.sandbox != nullptr) {
    const v1::SandboxSpec& sb = *req.sandbox;
    if (auto st = CheckList(caller, "network mode", ModeName(sb.network().mode()), p.network_modes);
        !st.ok()) {
      return st;
    }
    if (!p.domains.empty()) {
      for (const std::string& d : sb.network().allowed_domains()) {
        // A requested pattern must itself be covered: "*.a.example.com" by "*.example.com".
        std::string probe = absl::StartsWith(d, "*.") ? d.substr(2) : d;
        if (!DomainAllowed(probe, p.domains) && !DomainAllowed(d, p.domains)) {
          return Denied(caller, absl::StrCat("domain '", d, "' is not allowed (allowed: ",
                                             absl::StrJoin(p.domains, ", "), ")"));
        }
      }
    }
    if (auto st = CheckList(caller, "image", sb.image().empty() ? "host" : sb.image(), p.images);
        !st.ok()) {
      return st;
    }
    if (!sb.isolation().empty()) {
      if (auto st = CheckList(caller, "isolation level", sb.isolation(), p.isolation_levels);
          !st.ok()) {
        return st;
      }
    }
    uint64_t memory = sb.memory_bytes() ? sb.memory_bytes() : config.memory_bytes;
    if (p.max_memory_bytes && memory > p.max_memory_bytes) {
      return Denied(caller, absl::StrCat("sandbox.memory_bytes ", memory,
                                         " is above the tenant's maximum of ", p.max_memory_bytes));
    }
  }
  if (p.max_run_time > absl::ZeroDuration() && req.run_time > p.max_run_time) {
    return Denied(caller, absl::StrCat("run_timeout ", absl::FormatDuration(req.run_time),
                                       " is above the tenant's maximum of ",
                                       absl::FormatDuration(p.max_run_time)));
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
