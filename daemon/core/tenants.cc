#include "core/tenants.h"

#include <openssl/crypto.h>

#include "absl/strings/match.h"
#include "common/errors.h"
#include "common/sha256.h"

namespace sandgate::core {

absl::StatusOr<Caller> Tenants::Authenticate(
    const std::optional<std::string>& authorization) const {
  if (tenants_.empty()) return Caller{"local", true, nullptr};
  if (!authorization)
    return errors::Unauthenticated("missing authorization metadata (Bearer token)");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(*authorization, kBearer) || authorization->size() == kBearer.size()) {
    return errors::Unauthenticated("authorization metadata must be 'Bearer <token>'");
  }
  std::string digest = Sha256::Hex(absl::string_view(*authorization).substr(kBearer.size()));
  for (const TenantConfig& t : tenants_) {
    if (CRYPTO_memcmp(digest.data(), t.token_sha256.data(), digest.size()) == 0) {
      return Caller{t.name, t.is_operator, &t};
    }
  }
  return errors::Unauthenticated("unknown token");
}

std::optional<Caller> Tenants::Find(const std::string& name) const {
  if (tenants_.empty())
    return name == "local" ? std::optional<Caller>(Caller{"local", true, nullptr}) : std::nullopt;
  for (const TenantConfig& t : tenants_) {
    if (t.name == name) return Caller{t.name, t.is_operator, &t};
  }
  return std::nullopt;
}

}  // namespace sandgate::core
