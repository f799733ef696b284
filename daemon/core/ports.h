// PortManager: exposed ports of kept sessions (docs/sessions.md "Exposed ports").
//
// A session's code listens on a port inside its sandbox; ExposePort makes it reachable through
// the REST port (server/port_proxy.h) for the session's tenant, and, when asked, through a
// signed URL that expires. A connection is made by the sandbox itself (Session::ConnectPort:
// the init connects to 127.0.0.1:port in the sandbox's own network), so nothing of this
// touches the host's network, and only an exposed port of a live session of the caller's
// tenant is ever reached.
//
//   v1::ExposedPort exposed;
//   ports.Expose(caller, request, &exposed);              // exposed.path(), signed_path()
//   SANDGATE_ASSIGN_OR_RETURN(auto conn, ports.Open(caller, "s1", 8000));
//   write(conn->fd(), ...);                               // the bytes of the connection
//
// A signed URL's grant is "<expiry unix seconds>.<hex HMAC-SHA256(key, id \n port \n
// expiry)>", checked against the injected clock: it opens the port for the session's tenant
// until it expires, or until the port is unexposed or the session ends.
//
// Limits (core/config.h PortLimits): exposed ports per session, connections open at once per
// session and in all. A connection holds its session (a lease: it does not idle out while a
// connection is open) and is cancelled when the session ends or the port is unexposed.
//
// Thread safe. Open blocks (the sandbox's connect, at most ports.connect_timeout).
#ifndef SANDGATE_CORE_PORTS_H_
#define SANDGATE_CORE_PORTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "common/unique_fd.h"
#include "core/config.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

class PortManager {
 public:
  struct Deps {
    const PortLimits* limits = nullptr;  // not owned; outlive the manager
    SessionManager* sessions = nullptr;
    Clock* clock = nullptr;
    std::string signing_key;  // HMAC-SHA256 key of signed URLs, at least 32 bytes
    std::string base_url;     // what ExposedPort.url starts with, no trailing '/'
  };
  explicit PortManager(Deps deps) : deps_(std::move(deps)), base_url_(deps_.base_url) {}
  // Replaces Deps::base_url (the REST port's address is known once it listens).
  void set_base_url(std::string url) {
    absl::MutexLock lock(&mu_);
    base_url_ = std::move(url);
  }

  // The signing key: ports.signing_key_file's contents (INVALID_ARGUMENT when shorter than
  // 32 bytes, or unreadable), else 32 random bytes.
  static absl::StatusOr<std::string> LoadSigningKey(const PortLimits& limits);
  // A port number in a URL: decimal digits only, 1..65535; INVALID_ARGUMENT naming it else.
  static absl::StatusOr<uint16_t> ParsePort(absl::string_view text);

  // INVALID_ARGUMENT (port, ttl), NOT_FOUND (not the caller's session), FAILED_PRECONDITION
  // (the session ended, or its provider cannot expose ports), RESOURCE_EXHAUSTED (too many).
  absl::Status Expose(const Caller& caller, const v1::ExposePortRequest& request,
                      v1::ExposedPort* response);
  // Closes the port's open connections; NOT_FOUND when it is not exposed.
  absl::Status Unexpose(const Caller& caller, const v1::UnexposePortRequest& request,
                        v1::UnexposePortResponse* response);
  absl::Status List(const Caller& caller, const v1::ListPortsRequest& request,
                    v1::ListPortsResponse* response);

  // The caller a signed URL's `grant` stands for: the tenant of session `id`, while `port` is
  // exposed. PERMISSION_DENIED when the grant is malformed, forged (or for another session or
  // port) or expired; NOT_FOUND when the port is not (or no longer) exposed.
  absl::StatusOr<Caller> CheckGrant(const std::string& id, uint16_t port, absl::string_view grant);

  // One proxied connection into the sandbox. Destroying it closes the connection and frees
  // its place in the limits. Not thread safe (one user), but cancel() may fire from any
  // thread.
  class Connection {
   public:
    ~Connection();
    int fd() const { return fd_.get(); }
    // Fires (with the reason) when the session ends or the port is unexposed.
    const CancelToken& cancel() const { return cancel_; }

   private:
    friend class PortManager;
    Connection(PortManager* manager, std::string id, uint16_t port)
        : manager_(manager), id_(std::move(id)), port_(port) {}
    PortManager* const manager_;
    const std::string id_;
    const uint16_t port_;
    CancelToken cancel_;
    bool counted_ = false;  // in the limits (PortManager::mu_)
    std::unique_ptr<SessionManager::Lease> lease_;
    UniqueFd fd_;
  };
  // A connection to exposed `port` of session `id`, made by the sandbox. NOT_FOUND for another
  // tenant's session, an unknown one, or a port not exposed; FAILED_PRECONDITION when nothing
  // listens there or the session ended; RESOURCE_EXHAUSTED at a connection limit.
  absl::StatusOr<std::unique_ptr<Connection>> Open(const Caller& caller, const std::string& id,
                                                   uint16_t port);

  // "<expiry>.<hex hmac>" for session `id`'s `port` until `expiry` (unix seconds).
  std::string Sign(const std::string& id, uint16_t port, int64_t expiry) const;

 private:
  struct Exposure {
    absl::Time exposed_at;
    std::set<Connection*> open;
  };
  struct SessionPorts {
    std::string tenant;
    std::map<uint16_t, Exposure> ports;
    uint32_t open = 0;
  };
  void Fill(const std::string& id, uint16_t port, const Exposure& e, v1::ExposedPort* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(Connection* c);
  // Forgets the ports of sessions this daemon no longer holds.
  void ForgetEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Deps deps_;
  mutable absl::Mutex mu_;
  std::string base_url_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SessionPorts> sessions_ ABSL_GUARDED_BY(mu_);
  uint32_t open_ ABSL_GUARDED_BY(mu_) = 0;  // connections open, all sessions
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_PORTS_H_
