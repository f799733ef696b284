#include "server/reactor.h"

#include <optional>

#include "common/errors.h"

namespace sandgate::server {

absl::Status QueueFull() {
  return errors::ResourceExhausted(
      "queue full: the daemon's queue of blocking work is at its limit; retry");
}

absl::StatusOr<core::Caller> Authenticate(const core::Tenants& tenants,
                                          grpc::CallbackServerContext* ctx) {
  std::optional<std::string> authorization;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) authorization = std::string(it->second.data(), it->second.size());
  return tenants.Authenticate(authorization);
}

}  // namespace sandgate::server
