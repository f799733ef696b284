#include "server/dashboard_assets.h"

namespace sandgate::server {

const EmbeddedFile* FindDashboardFile(std::string_view path) {
  if (path == "/" || path == "/ui" || path == "/ui/") path = "/ui/index.html";
  for (const EmbeddedFile& f : DashboardFiles()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

const std::vector<std::pair<std::string_view, std::string_view>>& DashboardHeaders() {
  static const auto* const kHeaders =
      new std::vector<std::pair<std::string_view, std::string_view>>{
          {"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"Cache-Control", "no-store"},
      };
  return *kHeaders;
}

}  // namespace sandgate::server
