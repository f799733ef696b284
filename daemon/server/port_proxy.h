// PortProxy: the REST port's exposed-port routes (docs/sessions.md "Exposed ports").
//
//   /v1/sessions/{id}/ports/{port}/{path...}                with the tenant's bearer token
//   /v1/sessions/{id}/ports/{port}:signed/{grant}/{path...}  a signed URL (core/ports.h)
//
// Every method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS) is relayed to 127.0.0.1:port
// inside the session's sandbox, through a connection the sandbox itself makes
// (core::PortManager::Open), never through the host's network. A session another replica
// holds is reached through that replica (server/replica_streams.h, RemotePort): this proxy
// speaks HTTP with the caller as for its own sessions, and the owner, which checks the
// caller's token or the signed URL's grant itself, relays the connection's bytes. A request with
// "Upgrade: websocket" is relayed as an HTTP/1.1 upgrade: once the sandbox answers 101, the
// client's connection is taken over (HttpExchange::Upgrade, MHD's upgrade) and bytes are
// copied both ways as they are, no framing touched.
//
// What the sandbox sees: the request line with the path below the port (percent-encoded again,
// "." and ".." segments refused) and the query as sent, HTTP/1.0 (so that the answer ends with
// the connection, never chunked) or HTTP/1.1 for an upgrade; the caller's headers except
// Authorization, Cookie, Host and the hop-by-hop ones; Host 127.0.0.1:port,
// X-Forwarded-Prefix (the URL's part before the path) and X-Forwarded-Proto. What the caller
// sees: the sandbox's status and headers except the hop-by-hop ones and Set-Cookie, plus
// "Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups allow-modals
// allow-downloads": a page of the sandbox runs in an opaque origin, never as the daemon's
// own (it cannot read the dashboard's storage or call the API with its token).
//
// Bounds (core/config.h PortLimits): the request body (413), the sandbox's answer head (502),
// connections open per session and in all (429), bytes per connection both ways and the idle
// timeout (the connection ends), all counted and timed against the injected clock (a relay
// looks at it at least every kTick).
//
// Each relayed connection has a thread of its own while it lasts (at most
// ports.max_connections). Thread safe. Stop() (or the destructor) ends every relay and waits
// for their threads; call it after the HTTP server stopped and before the sessions go.
#ifndef SANDGATE_SERVER_PORT_PROXY_H_
#define SANDGATE_SERVER_PORT_PROXY_H_

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/ports.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "server/forwarding.h"
#include "server/http_server.h"
#include "server/replica_streams.h"

namespace sandgate::server {

class PortProxy {
 public:
  struct Deps {
    const core::Tenants* tenants = nullptr;  // all not owned; outlive the proxy
    core::PortManager* ports = nullptr;
    const core::PortLimits* limits = nullptr;
    Clock* clock = nullptr;
    // With a forwarder, a session another replica holds (not held by `sessions`) is reached
    // through it; without, it is refused as core::PortManager::Open refuses it.
    core::SessionManager* sessions = nullptr;
    Forwarder* forwarder = nullptr;
  };
  // Where a relay goes: a session's port, for a caller known by its token or (signed URL)
  // by a grant its session's holder checks.
  struct Target {
    std::optional<core::Caller> caller;  // nullopt: `grant` stands for it
    std::string grant;
    std::string authorization;  // the caller's Authorization header, for the owner
    std::string session;
    uint16_t port = 0;
  };
  // How often a waiting relay looks at the clock (idle timeout) and at Stop.
  static constexpr absl::Duration kTick = absl::Milliseconds(100);

  explicit PortProxy(Deps deps) : deps_(deps) {}
  ~PortProxy() { Stop(); }

  // The routes, for HttpServer::Start; they use this proxy, which must outlive the server.
  HttpServer::Routes Routes();
  void Stop();
  // Relays running now (tests, metrics).
  size_t active();

  class Relay;  // port_proxy.cc

 private:
  HttpRoute MakeRoute(const std::string& method, const std::string& pattern, bool is_signed);
  // A connection to `target`, here or through the replica that holds its session. Blocks.
  absl::StatusOr<std::unique_ptr<PortConnection>> Connect(const Target& target);
  // OK and counted, or why not (stopping, ports.max_connections).
  absl::Status Enter(Relay* relay);
  void Leave(Relay* relay);

  const Deps deps_;
  absl::Mutex mu_;
  std::set<Relay*> relays_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_PORT_PROXY_H_
