// GET /v1/health: what the daemon can give a session, beyond gRPC health's SERVING. Today
// the isolation levels of the local provider: `namespaces` always (the daemon does not start
// without bubblewrap), `gvisor` when runsc, the bridge and the platform's start-up probe
// (sandbox/local/gvisor_probe.h) let it; otherwise why not, as a session asking for it would
// be told. REST only, like /v1/whoami: it has no RPC.
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"
#include "server/http_api.h"
#include "server/rest_json.h"

namespace sandgate::server {

nlohmann::json IsolationHealth(const sandbox::Provider* local) {
  nlohmann::json levels = nlohmann::json::object();
  for (sandbox::Isolation level : {sandbox::Isolation::kNamespaces, sandbox::Isolation::kGvisor}) {
    // What CreateSession would check of a host-root session of this level.
    sandbox::SessionSpec spec;
    spec.isolation = level;
    absl::Status st =
        local == nullptr ? absl::UnavailableError("no local provider") : local->CheckSpec(spec);
    nlohmann::json answer = {{"available", st.ok()}};
    if (!st.ok()) answer["reason"] = EscapeInvalidUtf8(st.message());
    levels[sandbox::IsolationName(level)] = std::move(answer);
  }
  return levels;
}

HttpRoute HealthRoute(const ServiceDeps& deps, const sandbox::Provider* local) {
  // Computed once: each level's availability is fixed when the provider starts.
  const std::string body = nlohmann::json{{"isolation", IsolationHealth(local)}}.dump();
  return AuthenticatedRoute(
      deps, "GET", "/v1/health",
      [body](const HttpRequest&, const Exchange& x, const core::Caller&) { x->Reply(Json(body)); });
}

}  // namespace sandgate::server
