// NetProxy: the HTTP proxy that is a restricted or enabled session's only way out
// (isolation.md §3).
//
// Each session gets a TCP listener at 127.0.0.1:3128 *inside its own network namespace*
// (created on a short-lived thread that setns()es there, binds and listens; the socket stays
// in that namespace). One epoll thread serves every session's listener and connections:
//
//   CONNECT host:port HTTP/1.1          -> 200, then a byte tunnel
//   GET http://host[:port]/path HTTP/1.1 -> the request forwarded in origin form with
//                                          "Connection: close", then a byte tunnel
//
// Per request: the head (at most 8 KiB) is parsed strictly (CR/LF only as line ends, no
// control characters or spaces in the host; else 400); the host is normalised and matched
// against the allowlist (restricted) and the port against the allowed ports (else 403 +
// "X-Proxy-Error: blocked-by-allowlist"); the name is resolved by the daemon (Resolver, on a
// worker thread) and every address checked against the SSRF denylist (else 403 +
// "X-Proxy-Error: blocked-by-ssrf-guard"; so is any address of the daemon's own host, even a
// public one); the proxy then connects to the checked address
// itself, so a DNS answer that changes later (rebinding) cannot redirect it; 502 if that
// fails. Every decision goes to the session's callback (NetworkDecision in sandbox.h).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto proxy, NetProxy::Create(NewSystemResolver(), {}));
//   SANDGATE_ASSIGN_OR_RETURN(UniqueFd l, ListenInNetns(netns_fd, 3128));
//   SANDGATE_RETURN_IF_ERROR(proxy->AddSession("abc", std::move(l), policy, on_decision));
//   ...
//   proxy->RemoveSession("abc");  // closes the listener and every connection
//
// Parts: net_address.h (addresses, the SSRF denylist, the resolver), proxy_request.h (the
// request head, host names, the allowlist), net_proxy_loop.h (the proxy thread: net_proxy.cc
// runs the loop, proxy_connection.cc takes one connection from its head to the tunnel).
//
// Thread safe. Callbacks run on the proxy thread and must not block or call into NetProxy.
#ifndef SANDGATE_SANDBOX_LOCAL_NET_PROXY_H_
#define SANDGATE_SANDBOX_LOCAL_NET_PROXY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "sandbox/local/net_address.h"
#include "sandbox/local/proxy_request.h"
#include "sandbox/sandbox.h"

namespace sandgate::sandbox::local {

// A session's policy as the proxy applies it (see NetworkPolicy in sandbox.h).
struct ProxyPolicy {
  NetworkMode mode = NetworkMode::kRestricted;
  std::vector<std::string> allowed_domains;  // normalised
  std::vector<uint16_t> allowed_ports = {443, 80};
  // Ranges the SSRF guard lets through. For tests only (a test upstream on
  // 198.51.100.0/24); empty in production. Never exempts the host's own addresses.
  std::vector<Cidr> ssrf_exempt;
  uint32_t max_connections = 64;
  uint64_t max_bytes = 1ull << 30;
};

struct NetProxyOptions {
  absl::Duration head_timeout = absl::Seconds(30);     // client must send its head by then
  absl::Duration connect_timeout = absl::Seconds(10);  // upstream connect
  absl::Duration idle_timeout = absl::Minutes(10);     // tunnel without traffic
  // Lists the host's own addresses for the SSRF guard, once per resolved request; null =
  // ListHostAddresses. TESTS ONLY: lets a test make the listing fail.
  std::function<absl::StatusOr<std::vector<IpAddress>>()> host_addresses;
};

// Binds 127.0.0.1:`port` (SO_REUSEADDR, listen backlog 128, non-blocking, close-on-exec)
// inside the network namespace `netns_fd` refers to (/proc/<pid>/ns/net). The daemon must be
// able to setns() there (CAP_SYS_ADMIN).
absl::StatusOr<UniqueFd> ListenInNetns(int netns_fd, uint16_t port);

class NetProxy {
 public:
  using DecisionCallback = std::function<void(const NetworkDecision&)>;

  // Starts the proxy thread.
  static absl::StatusOr<std::unique_ptr<NetProxy>> Create(std::shared_ptr<Resolver> resolver,
                                                          const NetProxyOptions& options);
  // Closes every listener and connection, then stops the thread.
  ~NetProxy();

  // Serves `listener` (a listening TCP socket) for `session_id` under `policy`.
  // ALREADY_EXISTS if the id is served already.
  absl::Status AddSession(const std::string& session_id, UniqueFd listener, ProxyPolicy policy,
                          DecisionCallback on_decision);
  // Closes the session's listener and connections (each allowed one reports kClosed). Waits
  // until the proxy thread has done so; unknown ids are ignored. Not from a callback.
  void RemoveSession(const std::string& session_id);

  class Loop;  // the proxy thread's state; net_proxy_loop.h

 private:
  explicit NetProxy(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_NET_PROXY_H_
