// The HTTP/1.x text of the port proxy (server/port_proxy.h): which headers cross, the path the
// sandbox gets, the sandbox's answer head, and the proxy's own errors. Internal to server/.
// Pure functions; thread safe.
#ifndef SANDGATE_SERVER_PROXIED_HTTP_H_
#define SANDGATE_SERVER_PROXIED_HTTP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/http_server.h"

namespace sandgate::server::proxied_http {

// What a page of the sandbox may do in the caller's browser: run, in an opaque origin.
inline constexpr char kSandboxPolicy[] =
    "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

// A hop-by-hop header (RFC 9110 7.6.1), by its lower-cased name.
bool IsHopByHop(const std::string& lower);
// Request headers the sandbox never sees: the caller's credentials for the daemon, and what
// the proxy sets itself.
bool NotForwarded(const std::string& lower);
// The path below the port as the sandbox gets it: "/" + each segment percent-encoded again
// (RFC 3986 pchar kept). "." and ".." are refused: the proxied path is never normalised into
// something the caller did not send.
absl::StatusOr<std::string> UpstreamPath(const std::string& decoded);
bool ContainsIgnoreCase(const std::string& text, absl::string_view word);
// The request asks for a WebSocket (Upgrade: websocket, Connection: upgrade).
bool WantsWebSocket(const HttpRequest& r);

// The sandbox's answer head: "HTTP/1.x NNN reason" and its headers.
struct Head {
  unsigned int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string Header(const std::string& lower) const {
    for (const auto& [n, v] : headers) {
      if (n == lower) return v;
    }
    return "";
  }
};
// UNAVAILABLE (a 502 for the caller) when `text` is not an HTTP/1.x answer's head.
absl::StatusOr<Head> ParseHead(absl::string_view text);

// The proxy's own failures, as the REST API's errors (502 for what the sandbox did wrong).
HttpResponse BadGateway(const absl::Status& st);

}  // namespace sandgate::server::proxied_http

#endif  // SANDGATE_SERVER_PROXIED_HTTP_H_
