// What a sandbox asks the network proxy for, read strictly: host names and allowlist
// patterns normalised and matched, and a request head (CONNECT or an absolute http:// URI)
// parsed and, for forwarded requests, rewritten to the head sent upstream. No I/O.
//
//   SANDGATE_ASSIGN_OR_RETURN(ProxyRequest req,
//                             ParseProxyRequest("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n"));
//   HostAllowed({"*.example.com"}, req.host);  // true
//
// Thread safe: free functions and value types.
#ifndef SANDGATE_SANDBOX_LOCAL_PROXY_REQUEST_H_
#define SANDGATE_SANDBOX_LOCAL_PROXY_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandgate::sandbox::local {

// Lower-cases, drops one trailing dot, and checks the syntax of a host name or IP literal
// ("[::1]" or "::1" for IPv6). INVALID_ARGUMENT for anything else (spaces, CR/LF, "%", "_"…).
absl::StatusOr<std::string> NormaliseHost(absl::string_view host);
// Normalises allowlist entries: exact names or "*.suffix".
absl::StatusOr<std::vector<std::string>> NormaliseAllowlist(
    const std::vector<std::string>& patterns);
// Whether normalised `host` matches a normalised allowlist.
bool HostAllowed(const std::vector<std::string>& allowlist, absl::string_view host);

// A parsed request head.
struct ProxyRequest {
  std::string method;
  std::string host;  // normalised
  uint16_t port = 0;
  bool connect = false;
  // Absolute-URI requests: the head to send upstream (origin form, Host set to the target,
  // proxy and hop-by-hop headers dropped, "Connection: close").
  std::string upstream_head;
};
// Parses a complete head (ending in "\r\n\r\n"). INVALID_ARGUMENT names what is malformed.
absl::StatusOr<ProxyRequest> ParseProxyRequest(absl::string_view head);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_PROXY_REQUEST_H_
